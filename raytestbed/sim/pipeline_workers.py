"""Pipeline and PS jobs in flow timing, worker by worker: the worker program driven against the flow network.

By default (``timing.schedule: workers``) a pipeline job of two or more stages is not timed as
a sequence of job-wide coflows (as :mod:`raytestbed.network.traffic` describes ring-all-reduce
iterations, and pipeline and PS iterations with ``timing.schedule: coflows``) but as the programs
of its stage replicas and parameter servers: the worker program the emulator runs too
(:mod:`raytestbed.execution.worker_program`: the 1F1B order, A-SRPT eq. 5's inbound charge, the
ring all-reduce's 2(k-1) steps, the PS push and pull), each run by a
:class:`~raytestbed.execution.driver.Driver` with replayed compute
(:class:`~raytestbed.execution.compute.ReplayCompute`: profiled seconds and sizes, no payloads).
This module performs the drivers' blocks on the simulator's clock.

Every replica keeps its own time and blocks only on its own transfers and the data it needs, so the
replicas of one stage placed on two servers run unsynchronised and their cross-server transfers in
opposite directions overlap where their schedules bring them together, as in the emulator.

Transfers are flows of the simulator's network (:class:`~raytestbed.sim.flownet.FlowNet`), grouped
into connections by the rule the emulator's fluid model uses
(:func:`raytestbed.network.connections.connection_key`): a job's activation and gradient
transfers between two servers are one connection, each all-reduce (stage, iteration) between two
servers another, a transfer inside a server one per GPU pair; a connection gets one weighted
max-min share and its members split it equally.

Each all-reduce (stage, iteration), PS push and PS pull is a coflow for the policies, started with
its first transfer, grown when a later transfer of it starts, and finished when all its transfers have
arrived (``coflow_event``; the rule the emulator's clock uses too,
:mod:`raytestbed.network.coflow_book`); activation and gradient slices belong to no coflow.

An iteration ends when every replica has finished its backward (and all-reduce) of it: the latest
of their times. Its time is the gap to the previous end (the first counts from the run's start, the
pipeline fill included). Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job
from raytestbed.core.placement import Placement
from raytestbed.execution.compute import ReplayCompute, lognormal_noise
from raytestbed.execution.driver import Block, Driver, Outbound
from raytestbed.execution.monitor import RunMonitor
from raytestbed.execution.plan import PsSpec, WorkerSpec, plan_job
from raytestbed.execution.worker_program import ps_program, stage_program
from raytestbed.network.coflow_book import CoflowBook
from raytestbed.network.connections import connection_key


def uses_workers(job: Job, rings: bool = False) -> bool:
    """Whether flow timing (``timing.schedule: workers``) runs ``job`` worker by worker: a pipeline of
    two or more stages or a PS job (ring-all-reduce jobs, one-stage pipelines and jobs with explicit
    coflows or random PS flow sizes are coflow sequences, :mod:`raytestbed.network.traffic`).
    ``rings`` (``timing.schedule: transfers``): a ring-all-reduce job or one-stage pipeline of two or
    more replicas too, its all-reduce as the emulator runs it (2(k-1) steps of one chunk per replica).
    ValueError for such a job with an explicit compute time (its profiles time it)."""
    ring = rings and job.num_stages == 1 and job.stages[0].replicas >= 2 and job.comm in (CommPattern.RAR,
                                                                                         CommPattern.PIPELINE)
    if not ((job.num_stages >= 2 and job.comm is CommPattern.PIPELINE) or job.comm is CommPattern.PS or ring):
        return False
    if job.traffic is not None and (job.traffic.coflows or job.traffic.max_flow_bytes is not None):
        return False
    if job.traffic is not None and job.traffic.compute_s is not None:
        raise ValueError(f"job {job.job_id}: a {job.comm.value} job run worker by worker takes its compute and "
                         "transfer sizes from its profiles; its traffic may only give explicit coflows or PS flow "
                         "sizes (or time it with timing.schedule: coflows)")
    return True


@dataclass(eq=False)
class Transfer:
    """One transfer of ``nbytes`` bytes from ``src_gpu`` to ``dst_gpu`` (times in seconds)."""

    key: tuple
    sender: int  #: index of the sending participant
    src_gpu: int
    dst_gpu: int
    src_server: int
    dst_server: int
    nbytes: float
    conn: tuple  #: connection key
    coflow: tuple | None = None  #: the all-reduce coflow it belongs to (None: an activation or gradient slice)
    coflow_bytes: float = 0.0  #: bytes of that whole coflow (every transfer of it), bytes
    start_s: float = math.nan
    uid: int = -1  #: the flow's key in the network
    share: float = 1.0  #: its part of its connection's rate


@dataclass(eq=False)
class Step:
    """A blocked worker's request: at ``at`` start ``sends``, wake when they and ``recvs`` arrived."""

    at: float
    sends: tuple[Transfer, ...] = ()
    recvs: tuple[tuple, ...] = ()
    pending: set = field(default_factory=set)
    spans: dict = field(default_factory=dict)


@dataclass(eq=False)
class _Worker:
    idx: int
    spec: WorkerSpec | PsSpec  #: a stage replica or a parameter server
    gpu: int  #: its fabric endpoint
    server: int
    driver: Driver
    step: Step | None = None


class WorkerRun:
    """One run of a pipeline or PS job, worker by worker (module docstring).

    The network gets the transfers and shares of each instant's steps in one call (:meth:`_flush`);
    ``batched = False`` hands it each step's at once instead (the same network: tests compare the two).

    Args:
        job, placement, cluster: what runs where.
        iterations: iterations of the schedule this run performs (whole).
        start_s: the run's start, seconds.
        start_flows: ``(transfers) -> flow keys``: start these transfers in the network now (in this order).
        set_shares: ``(flow keys, shares)``: each flow's part of its connection's rate.
        wake_at: ``(t, participant index)``: call :meth:`resume` at ``t`` (> now).
        iteration_at: ``(t_end, compute_s, comm_s)``: the next iteration done at ``t_end`` (>= now).
        coflow_event: ``(kind, coflow id, bytes)``: an all-reduce, push or pull coflow ``"started"`` (its first
            transfer), ``"grew"`` (a later transfer of it started) or ``"finished"`` now.
        scale: each iteration of the schedule stands for this many of the job's (the simulator's
            ``iterations_per_coflow`` q: q x compute, q x bytes per transfer; 1 is exact).
        start_iteration: the job's iterations done before this run (names the coflows).
        speeds: the trial's per-type speeds: each worker computes at its GPU type's factor
            (:func:`~raytestbed.execution.plan.plan_job`); None: the cluster's ``gpu_speed``.
        compute_noise: coefficient of variation of a noise factor of mean 1 on every pass's charge
            (:func:`~raytestbed.execution.compute.lognormal_noise`; ``timing.compute_noise``); 0: none.
        noise_seed: the noise's seed; each participant of each run draws from it with its job, first
            iteration and index.
    """

    def __init__(self, job: Job, placement: Placement, cluster: Cluster, iterations: int, start_s: float,
                 start_flows: Callable, set_shares: Callable, wake_at: Callable, iteration_at: Callable,
                 coflow_event: Callable | None = None, scale: int = 1, start_iteration: int = 0,
                 speeds=None, compute_noise: float = 0.0, noise_seed: tuple[int, ...] = ()) -> None:
        plan = plan_job(job, placement, cluster, iterations=iterations, mode="replay", start_iteration=start_iteration,
                        speeds=speeds)
        self.scale = scale
        self.cluster = cluster
        self.job_id = job.job_id
        self.iterations = iterations
        self.now = start_s
        self._start_flows, self._set_shares = start_flows, set_shares
        self._wake_at, self._iteration_at = wake_at, iteration_at
        self._coflow_event = coflow_event
        self.start_iteration = start_iteration
        self._coflows = CoflowBook()  #: coflows started and not complete (:mod:`raytestbed.network.coflow_book`)

        def participant(i: int, spec, server: int, program) -> _Worker:
            # each participant of each run draws its own noise
            noise = (lognormal_noise(compute_noise, (*noise_seed, job.job_id, start_iteration, i))
                     if compute_noise > 0 else None)
            driver = Driver(program, spec, ReplayCompute(spec, scale, payloads=False, noise=noise), start_s,
                            iterations)
            return _Worker(i, spec, spec.gpu, server, driver)

        self.workers = [participant(i, w, cluster.server_of(w.gpu), stage_program) for i, w in enumerate(plan.workers)]
        self.ps = [participant(len(self.workers) + i, p, p.server, ps_program) for i, p in enumerate(plan.ps)]
        self.participants = self.workers + self.ps
        self._by_uid: dict[int, Transfer] = {}
        self._conns: dict[tuple, list[Transfer]] = {}
        self._arrived: dict[tuple, tuple[float, float]] = {}  #: key -> span, arrived before its receiver asked
        self._waiter: dict[tuple, _Worker] = {}  #: key -> the worker whose step waits for it
        self._monitor = RunMonitor(job.job_id, len(self.workers), iterations, start_iteration, start_s)
        self._instant: list[Transfer] = []  #: transfers that arrive at the end of this round
        self.batched = True  #: hand the network an instant's transfers and shares together
        #: transfers started since the last :meth:`_flush` (the network gets them in one call) and the
        #: connections whose members changed since then
        self._starting: list[Transfer] = []
        self._touched: set[tuple] = set()
        self.coflows_finished = 0  #: all-reduce, push and pull coflows finished so far
        self.iterations_completed = 0  #: iterations every worker finished (reported to ``iteration_at``)
        #: the servers its transfers may cross between (two or more: it uses the fabric's links)
        self.servers = frozenset(w.server for w in self.participants)

    # ------------------------------------------------------------------ driving
    def begin(self) -> None:
        """Start every worker's program at the run's start."""
        self._continue(list(self.participants))
        self._flush()

    def resume(self, now: float, *idxs: int) -> None:
        """The steps of participants ``idxs`` are due now (their ``at`` has come): start their transfers,
        each as if it came alone, in this order (the network gets them together)."""
        self.now = now
        for idx in idxs:
            self._continue([self.participants[idx]], admit=True)
        self._flush()

    def flows_done(self, now: float, uids) -> None:
        """The flows ``uids`` (this run's) arrived now; wakes the participants that no longer wait."""
        self.now = now
        woken: list[_Worker] = []
        changed: set[tuple] = set()
        for uid in uids:
            x = self._by_uid.pop(int(uid), None)
            if x is not None:
                self._arrive(x, woken, changed)
        self._touched |= changed
        if not self.batched:
            self._flush()
        woken.sort(key=lambda w: w.idx)
        self._continue(woken)
        self._flush()

    def _arrive(self, x: Transfer, woken: list, changed: set) -> None:
        """Transfer ``x`` arrived now: end its coflow if that completed it, leave its
        connection, satisfy its sender's step and its receiver's (or keep it for the receiver)."""
        span = (x.start_s, self.now)
        if x.coflow is not None:
            moved = self._coflows.arrive(x.coflow, x.nbytes)
            if moved is not None:
                self.coflows_finished += 1
                if self._coflow_event is not None:
                    self._coflow_event("finished", x.coflow, moved)
        members = self._conns.get(x.conn)
        if members is not None and x in members:
            members.remove(x)
            if members:
                changed.add(x.conn)
            else:
                del self._conns[x.conn]
        sender = self.participants[x.sender]
        if sender.step is not None and x.key in sender.step.pending:
            self._satisfy(sender, x.key, span, woken)
        w = self._waiter.pop(x.key, None)
        if w is None:
            self._arrived[x.key] = span
        else:
            self._satisfy(w, x.key, span, woken)

    def _flush(self) -> None:
        """Hand the network what this instant's steps did, in one call each: the transfers they started
        (in the order they started: the network numbers and orders its rows so) and the new shares of
        the connections whose members changed (each member 1 / members of its connection's rate). The
        same network as starting each step's transfers and resharing at once: nothing reads it between."""
        if self._starting:
            flows, self._starting = self._starting, []
            uids = self._start_flows(flows)
            for x, uid in zip(flows, uids.tolist()):
                x.uid = uid
                self._by_uid[uid] = x
        if self._touched:
            keys, shares = [], []
            for conn in self._touched:
                members = self._conns.get(conn)
                if members:
                    share = 1.0 / len(members)
                    for x in members:
                        if x.share != share:
                            x.share = share
                            keys.append(x.uid)
                            shares.append(share)
            self._touched = set()
            if keys:
                self._set_shares(keys, shares)

    def _satisfy(self, w: _Worker, key: tuple, span: tuple[float, float], woken: list) -> None:
        w.step.pending.discard(key)
        w.step.spans[key] = span
        if not w.step.pending and w not in woken:
            woken.append(w)

    def _continue(self, workers: list[_Worker], admit: bool = False) -> None:
        """Run each participant until its program blocks: one with a satisfied step wakes now (its
        time becomes now), one without a step starts at its own time; ``admit``: the first ones'
        steps are due now and start first. Rounds, as the emulator's clock admits steps in batches: a
        transfer to the same GPU or of no bytes arrives at once, after every step of the round has
        started its transfers, and whoever that wakes runs in the next round."""
        queue = [w for w in workers if not admit or self._admit(w)]
        while queue or self._instant:  # (an admitted step that still waits may have sent an instant transfer)
            while queue:
                w = queue.pop(0)
                if w.step is None:
                    block = w.driver.start()
                else:
                    spans, w.step = w.step.spans, None
                    block = w.driver.wake(max(w.driver.t, self.now), spans)
                self._report(w)
                if block is None:
                    continue
                w.step = step = self._step(w, block)
                if step.at > self.now:
                    self._wake_at(step.at, w.idx)
                elif self._admit(w):
                    queue.append(w)
            if self._instant:
                instant, self._instant = self._instant, []
                woken: list[_Worker] = []
                changed: set[tuple] = set()
                for x in instant:
                    self._arrive(x, woken, changed)
                self._touched |= changed
                if not self.batched:
                    self._flush()
                queue = sorted(woken, key=lambda v: v.idx)

    def _admit(self, w: _Worker) -> bool:
        """Start the transfers of ``w``'s step now; True if nothing is left to wait for. A transfer to
        the same GPU, or of no bytes, waits for the end of the round (:meth:`_continue`)."""
        step = w.step
        flows = []
        for x in step.sends:
            x.start_s = self.now
            step.pending.add(x.key)
            if x.coflow is not None:
                first = self._coflows.start(x.coflow, x.coflow_bytes)
                if self._coflow_event is not None:
                    self._coflow_event("started" if first else "grew", x.coflow, x.coflow_bytes)
            (self._instant if x.src_gpu == x.dst_gpu or x.nbytes <= 0 else flows).append(x)
        for x in flows:  # (started in the network by :meth:`_flush`)
            self._starting.append(x)
            self._conns.setdefault(x.conn, []).append(x)
            self._touched.add(x.conn)
        if flows and not self.batched:
            self._flush()
        for key in step.recvs:
            span = self._arrived.pop(key, None)
            if span is None:
                step.pending.add(key)
                self._waiter[key] = w
            else:
                step.spans[key] = span
        return not step.pending

    # ------------------------------------------------------------------ the drivers' blocks
    def _step(self, w: _Worker, block: Block) -> Step:
        return Step(block.at, tuple(self._transfer(w, o) for o in block.sends), block.recvs)

    def _transfer(self, w: _Worker, o: Outbound) -> Transfer:
        """The flow of ``o`` from ``w``: bytes times ``scale``; its connection (module docstring)."""
        out = o.out
        dst = self.cluster.server_of(out.dst_gpu)
        conn = connection_key(self.cluster, self.job_id, out.coflow, w.gpu, out.dst_gpu)
        return Transfer(out.key, w.idx, w.gpu, out.dst_gpu, w.server, dst, float(o.nbytes) * self.scale, conn,
                        out.coflow, float(out.coflow_bytes) * self.scale)

    def _report(self, w: _Worker) -> None:
        """Worker ``w``'s records of the mini-batches it finished; an iteration ends when every
        worker has finished it (:class:`~raytestbed.execution.monitor.RunMonitor`)."""
        for rec in w.driver.take_records():
            for t_end, recs in self._monitor.add(rec):
                self.iterations_completed += 1
                self._iteration_at(t_end, max(r[3] for r in recs), max(r[4] for r in recs))

    # ------------------------------------------------------------------ fast-forward (sim/fastforward.py)
    @property
    def limit(self) -> int:
        """Iterations the run performs in all (fast-forward lowers it)."""
        return self.participants[0].driver.limit

    def signature(self, now: float) -> tuple[tuple, tuple[float, ...]]:
        """The run's state now, relative to now: ``(shape, values)``: what each participant waits
        for (counts) and its times (seconds after now), the transfers in flight and kept for their
        receivers (counts). Two iteration ends with equal signatures (and equal flows) continue
        alike."""
        shape, vals = [], []
        for w in self.participants:
            d, st = w.driver, w.step
            vals.append(d.t - now)
            if st is None:
                shape.append((d.done, -1, -1))
            else:
                shape.append((d.done, len(st.sends), len(st.pending)))
                vals.append(st.at - now)
        shape.append((len(self._by_uid), len(self._arrived), len(self._waiter), len(self._coflows)))
        for x in self._by_uid.values():
            vals.append(x.start_s - now)
        for a, b in self._arrived.values():
            vals += (a - now, b - now)
        return tuple(shape), tuple(vals)

    def shift(self, dt: float, skip: int) -> None:
        """A fast-forward window: every time the run holds moves ``dt`` seconds later (its workers',
        their steps', transfers' and spans', its monitor's) and it runs ``skip`` fewer iterations
        (the drivers' limit; they have not reached it: the iterations after the window keep their
        indices, the skipped ones are the last)."""
        transfers = {id(x): x for x in self._by_uid.values()}
        for w in self.participants:
            d = w.driver
            d.limit -= skip
            d.shift(dt)
            st = w.step
            if st is not None:
                st.at += dt
                st.spans = {k: (a + dt, b + dt) for k, (a, b) in st.spans.items()}
                for x in st.sends:
                    transfers[id(x)] = x
        for x in transfers.values():
            x.start_s += dt
        self._arrived = {k: (a + dt, b + dt) for k, (a, b) in self._arrived.items()}
        self._monitor.shift(dt)
        self.now += dt
