"""Pipeline and PS jobs in flow timing, worker by worker: the emulator's worker schedule on the simulator's clock.

By default (``timing.schedule: workers``) a pipeline job of two or more stages is not timed as
a sequence of job-wide coflows (as :mod:`raytestbed.network.traffic` describes ring-all-reduce
iterations, and pipeline and PS iterations with ``timing.schedule: coflows``) but as the programs
of its stage replicas, the schedule the emulator's workers run in replay mode
(the emulator's StageWorker, sizes from :func:`~raytestbed.execution.plan.plan_job`):

* PipeDream 1F1B: stage s keeps S - s mini-batches in flight, then alternates one backward and
  one forward;
* a forward takes the activation slices of every upstream replica at once and holds the GPU while
  they flowed (A-SRPT eq. 5; overlapping inbound flows hold it once,
  :class:`~raytestbed.execution.plan.InboundTime`), computes p^f, then sends one slice
  A_s / (k_s k_{s+1}) bytes to every downstream replica, one after the other;
* a backward takes the gradient slices the same way, computes p^b, sends gradient slices
  upstream one after the other, then runs the stage's ring all-reduce: 2(k-1) steps, each sending
  a chunk of h/k bytes to the ring successor and receiving one from the predecessor.

A parameter-server job runs the same way: each worker computes p^f + p^b, pushes one shard of
h / #PS bytes to every PS at once and waits for the summed shards; each PS waits for its shard from
every worker, then sends the sum back to all of them at once (the emulator's ``ParamServer``), so
a PS whose shards arrive early pulls early.

Every replica keeps its own time and blocks only on its own transfers and the data it needs, so the
replicas of one stage placed on two servers run unsynchronised and their cross-server transfers in
opposite directions overlap where their schedules bring them together, as in the emulator.

Transfers are flows of the simulator's network (:class:`~raytestbed.sim.flownet.FlowNet`), grouped
as the emulator's fluid model groups them into connections: a job's activation and gradient
transfers between two servers are one connection, each all-reduce (stage, iteration) between two
servers another, a transfer inside a server one per GPU pair; a connection gets one weighted
max-min share and its members split it equally.

Each all-reduce (stage, iteration) is a coflow for the policies, started and finished as the
emulator's fabric reports it: started when one of its transfers starts while none is in flight,
finished when its last transfer in flight arrives (``coflow_event``); activation and gradient
slices belong to no coflow.

An iteration ends when every replica has finished its backward (and all-reduce) of it: the latest
of their times. Its time is the gap to the previous end (the first counts from the run's start, the
pipeline fill included). Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job
from raytestbed.core.placement import Placement
from raytestbed.execution.plan import (InboundTime, PsSpec, WorkerSpec, coflow_bytes, one_f_one_b, plan_job,
                                          ring_chunks, rotated, split_sizes)
from raytestbed.execution.monitor import RunMonitor


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
    t: float
    program: Generator | None = None
    step: Step | None = None
    stepped: bool = False
    inbound: InboundTime = field(default_factory=InboundTime)
    acc: dict = field(default_factory=dict)  #: iteration -> [compute s, communication s]


class WorkerRun:
    """One run of a pipeline or PS job, worker by worker (module docstring).

    Args:
        job, placement, cluster: what runs where.
        iterations: iterations of the schedule this run performs (whole).
        start_s: the run's start, seconds.
        start_flows: ``(transfers) -> flow keys``: start these transfers in the network now.
        set_shares: ``(flow keys, share)``: the flows are one connection's members, each gets ``share``.
        wake_at: ``(t, participant index)``: call :meth:`resume` at ``t`` (> now).
        iteration_at: ``(t_end, compute_s, comm_s)``: the next iteration done at ``t_end`` (>= now).
        coflow_event: ``(kind, coflow id, bytes)``: an all-reduce, push or pull coflow ``"started"`` /
            ``"finished"`` now.
        scale: each iteration of the schedule stands for this many of the job's (the simulator's
            ``iterations_per_coflow`` q: q x compute, q x bytes per transfer; 1 is exact).
        start_iteration: the job's iterations done before this run (names the coflows).
    """

    def __init__(self, job: Job, placement: Placement, cluster: Cluster, iterations: int, start_s: float,
                 start_flows: Callable, set_shares: Callable, wake_at: Callable, iteration_at: Callable,
                 coflow_event: Callable | None = None, scale: int = 1, start_iteration: int = 0) -> None:
        plan = plan_job(job, placement, cluster, iterations=iterations, mode="replay")
        self.scale = scale
        self.cluster = cluster
        self.iterations = iterations
        self.now = start_s
        self._start_flows, self._set_shares = start_flows, set_shares
        self._wake_at, self._iteration_at = wake_at, iteration_at
        self._coflow_event = coflow_event
        self.start_iteration = start_iteration
        self._coflows: dict[tuple, list] = {}  #: all-reduce coflow -> [transfers in flight, bytes arrived]
        self.workers = [_Worker(i, w, w.gpu, cluster.server_of(w.gpu), start_s) for i, w in enumerate(plan.workers)]
        self.ps = [_Worker(len(self.workers) + i, p, p.gpu, p.server, start_s) for i, p in enumerate(plan.ps)]
        self.participants = self.workers + self.ps
        self._by_uid: dict[int, Transfer] = {}
        self._conns: dict[tuple, list[Transfer]] = {}
        self._arrived: dict[tuple, tuple[float, float]] = {}  #: key -> span, arrived before its receiver asked
        self._waiter: dict[tuple, _Worker] = {}  #: key -> the worker whose step waits for it
        self._monitor = RunMonitor(job.job_id, len(self.workers), iterations, start_iteration, start_s)
        self._instant: list[Transfer] = []  #: transfers that arrive at the end of this round

    # ------------------------------------------------------------------ driving
    def begin(self) -> None:
        """Start every worker's program at the run's start."""
        for w in self.workers:
            w.program = self._program(w)
        for p in self.ps:
            p.program = self._ps_program(p)
        self._continue(list(self.participants))

    def resume(self, now: float, idx: int) -> None:
        """Participant ``idx``'s step is due now (its ``at`` has come): start its transfers."""
        self.now = now
        self._continue([self.participants[idx]], admit=True)

    def flows_done(self, now: float, uids) -> None:
        """The flows ``uids`` (this run's) arrived now; wakes the participants that no longer wait."""
        self.now = now
        woken: list[_Worker] = []
        changed: set[tuple] = set()
        for uid in uids:
            x = self._by_uid.pop(int(uid), None)
            if x is not None:
                self._arrive(x, woken, changed)
        self._reshare(changed)
        woken.sort(key=lambda w: w.idx)
        self._continue(woken)

    def _arrive(self, x: Transfer, woken: list, changed: set) -> None:
        """Transfer ``x`` arrived now: end its coflow if it was the last in flight, leave its
        connection, satisfy its sender's step and its receiver's (or keep it for the receiver)."""
        span = (x.start_s, self.now)
        if x.coflow is not None:
            cf = self._coflows[x.coflow]
            cf[0] -= 1
            cf[1] += x.nbytes
            if cf[0] == 0:
                del self._coflows[x.coflow]
                if self._coflow_event is not None:
                    self._coflow_event("finished", x.coflow, cf[1])
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

    def _reshare(self, changed: set) -> None:
        for conn in sorted(changed, key=repr):
            self._share(conn)

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
                spans = None
                if w.step is not None:
                    w.t = max(w.t, self.now)
                    spans, w.step = w.step.spans, None
                try:
                    step = w.program.send(spans)
                except StopIteration:
                    w.program = None
                    continue
                w.step = step
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
                self._reshare(changed)
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
                cf = self._coflows.setdefault(x.coflow, [0, 0.0])
                if cf[0] == 0 and self._coflow_event is not None:
                    self._coflow_event("started", x.coflow, x.coflow_bytes)
                cf[0] += 1
            (self._instant if x.src_gpu == x.dst_gpu or x.nbytes <= 0 else flows).append(x)
        if flows:
            uids = self._start_flows(flows)
            for x, uid in zip(flows, uids):
                x.uid = int(uid)
                self._by_uid[x.uid] = x
                self._conns.setdefault(x.conn, []).append(x)
            for conn in {x.conn for x in flows}:
                self._share(conn)
        for key in step.recvs:
            span = self._arrived.pop(key, None)
            if span is None:
                step.pending.add(key)
                self._waiter[key] = w
            else:
                step.spans[key] = span
        return not step.pending

    def _share(self, conn: tuple) -> None:
        members = self._conns.get(conn)
        if members:
            share = 1.0 / len(members)
            change = [x for x in members if x.share != share]
            if change:
                for x in change:
                    x.share = share
                self._set_shares([x.uid for x in change], share)

    # ------------------------------------------------------------------ the schedule
    def _transfer(self, w: _Worker, dst_gpu: int, key: tuple, nbytes: float, coflow, coflow_bytes: float = 0.0
                  ) -> Transfer:
        dst = self.cluster.server_of(dst_gpu)
        conn = ("intra", coflow, w.gpu, dst_gpu) if dst == w.server else ("inter", coflow, w.server, dst)
        return Transfer(key, w.idx, w.gpu, dst_gpu, w.server, dst, float(nbytes) * self.scale, conn, coflow,
                        float(coflow_bytes) * self.scale)

    def _step(self, w: _Worker, sends=(), recvs=()):
        w.stepped = True
        spans = yield Step(w.t, tuple(sends), tuple(recvs))
        return spans

    def _receive(self, w: _Worker, keys: list[tuple], acc: list):
        t0 = w.t
        spans = yield from self._step(w, recvs=keys)
        w.t += w.inbound.charge([spans[k] for k in keys])
        acc[1] += w.t - t0

    def _program(self, w: _Worker):
        """Worker ``w``'s 1F1B schedule (the emulator's ``StageWorker.run``)."""
        sp = w.spec
        for kind, i in one_f_one_b(sp.in_flight, lambda: sp.iterations):
            if kind == "fwd":
                yield from self._forward(w, i)
                continue
            w.stepped = False
            yield from self._backward(w, i)
            if not w.stepped:
                yield from self._step(w)
            self._report(w, i)

    def _forward(self, w: _Worker, i: int):
        sp = w.spec
        keys = [(sp.gpu, "act", i, q) for q in range(sp.replicas[sp.stage - 1])] if sp.stage > 0 else []
        t0 = yield from self._pass(w, i, keys, sp.profile.fwd_s, sp.next_gpus, "act", sp.act_out_bytes)
        w.acc[i][1] += w.t - t0

    def _pass(self, w: _Worker, i: int, inbound: list[tuple], compute_s: float, out_gpus: tuple, kind: str,
              nbytes: int):
        """Take the ``inbound`` slices of mini-batch ``i`` at once, compute, send one ``kind`` slice of
        ``nbytes`` to each of ``out_gpus`` one after the other; returns the time the sends began."""
        acc = w.acc.setdefault(i, [0.0, 0.0])
        if inbound:
            yield from self._receive(w, inbound, acc)
        w.t += compute_s * self.scale
        acc[0] += compute_s * self.scale
        t0 = w.t
        for r in rotated(len(out_gpus), w.spec.replica):
            g = out_gpus[r]
            yield from self._step(w, sends=[self._transfer(w, g, (g, kind, i, w.spec.replica), nbytes, None)])
        return t0

    def _backward(self, w: _Worker, j: int):
        sp = w.spec
        keys = [(sp.gpu, "grad", j, r) for r in range(len(sp.next_gpus))]
        t0 = yield from self._pass(w, j, keys, sp.profile.bwd_s, sp.prev_gpus, "grad", sp.act_in_bytes)
        k, pos = len(sp.ring), sp.ring_pos
        if sp.ps_gpus:  # push a shard to every PS (one coflow), then take the summed shards back (another)
            n = len(sp.ps_gpus)
            sizes = split_sizes(int(sp.profile.param_bytes), n)
            it = self.start_iteration + j
            total = coflow_bytes("push", sp, sum(sizes))
            yield from self._step(w, sends=[self._transfer(w, sp.ps_gpus[q], (("ps", q), "push", j, sp.rank), sizes[q],
                                                           (sp.job_id, it, "push"), total) for q in range(n)])
            yield from self._step(w, recvs=[(sp.gpu, "pull", j, q) for q in range(n)])
        elif k > 1:  # ring all-reduce: reduce-scatter then all-gather, 2(k-1) steps
            sizes = split_sizes(int(sp.profile.param_bytes), k)
            nxt, prv = sp.ring[(pos + 1) % k], (pos - 1) % k
            total = coflow_bytes("ar", sp, sum(sizes))
            for s in range(2 * (k - 1)):
                send_i = ring_chunks(pos, k, s)[0]
                cf = (sp.job_id, self.start_iteration + j, f"ar{sp.stage}")
                out = self._transfer(w, nxt, (nxt, "ar", (j, s), pos), sizes[send_i], cf, total)
                yield from self._step(w, sends=[out], recvs=[(sp.gpu, "ar", (j, s), prv)])
        w.acc[j][1] += w.t - t0

    def _ps_program(self, p: _Worker):
        """Parameter server ``p``: per iteration, wait for every worker's shard, then send the sum back
        to every worker at once (the emulator's ``ParamServer.run``)."""
        sp = p.spec
        for j in range(self.iterations):
            yield from self._step(p, recvs=[(("ps", sp.index), "push", j, r) for r in range(len(sp.worker_gpus))])
            cf = (sp.job_id, self.start_iteration + j, "pull")
            total = coflow_bytes("pull", sp, sp.num_ps * sp.shard_bytes)
            yield from self._step(p, sends=[self._transfer(p, g, (g, "pull", j, sp.index), sp.shard_bytes, cf, total)
                                            for g in sp.worker_gpus])

    def _report(self, w: _Worker, j: int) -> None:
        """Worker ``w`` finished iteration ``j`` at its time; the iteration ends when every worker has
        (the emulator's :class:`~raytestbed.execution.monitor.RunMonitor` rule)."""
        comp, comm = w.acc.pop(j)
        for t_end, recs in self._monitor.add((j, w.idx, w.t, comp, comm, None, 0, 0.0, comp)):
            self._iteration_at(t_end, max(r[3] for r in recs), max(r[4] for r in recs))
