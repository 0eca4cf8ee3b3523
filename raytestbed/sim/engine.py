"""The discrete-event simulator: the ``sim`` backend.

Events (arrivals, completions, flow completions, ticks, faults) are kept in a
heap; time jumps from one event to the next. Two timing modes say how fast a
running job progresses:

* ``analytic``: a job runs at the per-iteration time of an analytic model
  (A-SRPT eq. 7 by default, SJF-BCO eq. 8 or GADGET eq. 1, see
  :mod:`raytestbed.core.timing`). Contention-dependent models (SJF-BCO) are
  re-evaluated for every running job whenever a job starts or ends. Events per
  job: O(1), which lets the simulator handle 150,000 jobs.
* ``flow``: every iteration of a ring-all-reduce job is a compute phase followed by the job's
  coflows (:mod:`raytestbed.network.traffic`); a pipeline of two or more stages or a
  parameter-server job runs worker by worker, each worker's transfers starting as its schedule
  reaches them (the worker program the emulator runs, :mod:`raytestbed.execution.worker_program`,
  driven by :mod:`raytestbed.sim.pipeline_workers`), or with
  ``schedule="coflows"`` as coflows too (fewer events, approximate). All flows share links through the
  weighted max-min allocator (:mod:`raytestbed.network.allocator`), so contention *emerges*; a
  network policy may set weights or rates. The active flows are
  arrays (:mod:`raytestbed.sim.flownet`); network policies read them through
  ``view.flows()`` and answer with rate arrays (:mod:`raytestbed.core.flows`). ``iterations_per_coflow``
  = q lumps q iterations into one cycle (q x compute, q x bytes) to bound the
  event count; q = 1 is exact. Each job's record also gets its *lower bound*
  (Parrot Thm 3 with the §7 compute extension): the sum over the coflows it ran
  of their stand-alone optimal CCT (O3, eq. 26) plus its compute time (a pipeline: its slowest
  stage's compute per iteration).
  With GPU types of different speed factors (cluster ``gpu_speed``), in a job run worker by worker
  each worker computes at its own GPU's speed (:attr:`raytestbed.execution.plan.WorkerSpec.speed`),
  as the emulator's workers do; a job timed as coflows computes at each stage's slowest replica
  (:meth:`~raytestbed.core.gpu_types.GpuSpeeds.placed_job`). A ring-all-reduce job whose replicas
  differ in speed always runs worker by worker (its fast replicas start their all-reduce steps early,
  against the other jobs' flows, as with ``schedule="transfers"``). A restarted job starts its run
  ``restore_s`` later (its checkpoint restore), as in the emulator.

Same events at the same time are ordered: completions, then faults, then
arrivals, then ticks; ties by insertion order. Deterministic for a given input.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.eventcore import P_DONE, EventCore, RunResult
from raytestbed.core.job import Job
from raytestbed.core.policy import Policy
from raytestbed.core.placement import Placement
from raytestbed.core.state import RunningJob
from raytestbed.core.timing import IterationModel, AsrptModel
from raytestbed.core.gpu_types import GpuSpeeds, TypedModel, transfer_timing_refusal
from raytestbed.errors import PolicyError
from raytestbed.core.o3 import o3_gamma
from raytestbed.network.traffic import IterationTraffic, iteration_traffic
from raytestbed.sim.fastforward import FastForward, Mark
from raytestbed.sim.flownet import FlowNet
from raytestbed.sim.pipeline_workers import WorkerRun, uses_workers
from raytestbed.core.events import (
    CoflowFinished,
    CoflowGrew,
    CoflowStarted,
    Decision,
    Event,
    Fault,
    IterationMeasured,
)

#: flow mode, how jobs run: ``workers`` (pipelines of two or more stages and PS jobs worker by worker,
#: ring all-reduce jobs as coflows), ``transfers`` (ring all-reduce jobs worker by worker too: every
#: transfer as the emulator makes it), ``coflows`` (every job as compute + job-wide coflows)
SCHEDULES = ("workers", "transfers", "coflows")


#: the simulator's result is the event core's (one type for both backends)
SimResult = RunResult


@dataclass
class _Run:
    """Backend-private progress of a running job."""

    version: int = 0
    # analytic
    alpha: float = math.nan
    last_s: float = 0.0
    restore_until: float = 0.0  #: analytic: no progress before this time (restoring a checkpoint), seconds
    # flow
    traffic: IterationTraffic | None = None
    cycle: int = 0
    coflow_idx: int = -1  # -1 = computing
    cycle_start_s: float = 0.0
    workers: WorkerRun | None = None  # a pipeline or PS job run worker by worker
    placed: Job | None = None  #: flow: the job with its compute at its GPUs' speeds (GpuSpeeds.placed_job)
    servers: frozenset = frozenset()  #: servers its transfers cross between (two or more: it uses links)
    frozen: tuple | None = None  #: in a fast-forward window: (its end s, its flows taken out of the network)
    cycle_lb: float = math.nan  #: coflow runs: a lower bound on one cycle's seconds (NaN: not known yet)



class OtherJobs(Mapping):
    """The running jobs except one, as job id -> (job, placement): what an iteration model reads
    for contention (:meth:`~raytestbed.core.timing.IterationModel.iteration_time`), read from the
    running jobs when the model looks, so a model without contention costs nothing per start."""

    __slots__ = ("_running", "_jid")

    def __init__(self, running: Mapping[int, RunningJob], jid: int) -> None:
        self._running = running
        self._jid = jid

    def __getitem__(self, k: int) -> tuple[Job, Placement]:
        if k == self._jid:
            raise KeyError(k)
        r = self._running[k]
        return r.job, r.placement

    def __iter__(self) -> Iterator[int]:
        return (k for k in self._running if k != self._jid)

    def __len__(self) -> int:
        return len(self._running) - (self._jid in self._running)


#: heap items of one run of a job: (kind, job id, run version, ...); stale once the run is gone
_RUN_EVENTS = frozenset({"finish", "compute", "restored", "ffend", "wstep", "witer"})


class Simulator(EventCore):
    """Run one placement policy (and optionally one network policy) over a job list.

    The event loop, the dispatch to the policies and the GPU books are the shared
    :class:`~raytestbed.core.eventcore.EventCore`; this class adds how running jobs progress.

    Args:
        cluster: the cluster.
        jobs: the jobs; ids must be unique.
        policy: the placement/admission policy.
        network_policy: optional network policy (flow mode only).
        mode: ``analytic`` or ``flow``.
        model: iteration-time model for analytic mode (default A-SRPT eq. 7).
        iterations_per_coflow: q, iterations lumped per cycle in flow mode.
        schedule: flow mode: ``workers`` (pipelines of two or more stages and PS jobs worker by
            worker, :mod:`raytestbed.sim.pipeline_workers`), ``transfers`` (ring all-reduce jobs
            too) or ``coflows`` (job-wide coflows, :mod:`raytestbed.network.traffic`).
        faults: faults to inject.
        on_event: callback receiving every event (for the event log).
        on_decisions: callback (event, policy name, wall seconds, decisions) for
            every ``on_event`` call that returned decisions.
        progress: callback (finished jobs, total jobs) called as jobs finish.
        until_s: optional horizon, seconds: the run stops when the next event lies
            beyond it (jobs still running keep their progress up to ``until_s`` in
            ``SimResult.iterations_done``); None runs until every job finished.
        speeds: per-type speeds (:class:`~raytestbed.core.gpu_types.GpuSpeeds`: the cluster's GPU
            types, speed factors and throughput table); flow timing takes the factors, and refuses a
            job that the throughput table times (the table's time includes communication).
        restore_s: seconds a restarted job (after a preemption, failure or resize) spends restoring
            its checkpoint on its new GPUs before it progresses.
        fast_forward: flow timing: skip whole periods of steady worker-by-worker runs where the
            result is the same (:mod:`raytestbed.sim.fastforward`; off with a network policy and with
            compute noise).
        compute_noise: flow timing, jobs run worker by worker: every pass's charge times a noise factor
            of mean 1 and this coefficient of variation (:mod:`raytestbed.sim.pipeline_workers`); 0: none.
        noise_seed: the compute noise's seed (the run's seed and ``timing.compute_noise_seed``).
    """

    #: flow timing: a worker-by-worker run's steps due at one instant start together, and its transfers
    #: and shares reach the network in one call per instant (False: one step, one call at a time; the
    #: same results, which tests check)
    batch_steps = True

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy: Policy,
        network_policy: Policy | None = None,
        mode: str = "analytic",
        model: IterationModel | None = None,
        iterations_per_coflow: int = 1,
        schedule: str = "workers",
        faults: Iterable[Fault] = (),
        on_event: Callable[[Event], None] | None = None,
        on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        until_s: float | None = None,
        speeds: GpuSpeeds | None = None,
        restore_s: float = 0.0,
        fast_forward: bool = True,
        compute_noise: float = 0.0,
        noise_seed: tuple[int, ...] = (),
    ) -> None:
        if mode not in ("analytic", "flow"):
            raise ValueError(f"unknown timing mode {mode!r} (known: analytic, flow)")
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown flow schedule {schedule!r} (known: {', '.join(SCHEDULES)})")
        if network_policy is not None and mode != "flow":
            raise ValueError("a network policy needs timing mode 'flow'")
        speeds = speeds or GpuSpeeds(cluster)
        if mode == "flow" and (why := transfer_timing_refusal(jobs, speeds)) is not None:
            raise ValueError(why)
        self.mode = mode
        self.speeds = speeds
        super().__init__(cluster, jobs, (policy, network_policy), faults, on_event=on_event,
                         on_decisions=on_decisions, progress=progress, speeds=speeds, restore_s=restore_s)
        self.model = model or AsrptModel()
        if not speeds.uniform:
            self.model = TypedModel(self.model, speeds)
        self.q = int(iterations_per_coflow)
        self.schedule = schedule
        self.until_s = until_s  #: stop the clock here (None: run until every job finished)
        self._runs: dict[int, _Run] = {}
        # flow mode: every active flow in arrays (sim/flownet.py)
        self._net = FlowNet(cluster, jobs) if mode == "flow" else None
        self._egress = np.array([s.nic_egress_bps for s in cluster.servers], dtype=float)
        self._ingress = np.array([s.nic_ingress_bps for s in cluster.servers], dtype=float)
        self._net_version = 0
        self._worker_jobs: set[int] = set()  #: jobs running worker by worker now
        self._retime = False  #: events were delivered since the flows were last re-timed
        self._coflows_synced = None
        self.compute_noise = float(compute_noise)
        self.noise_seed = tuple(int(x) for x in noise_seed)
        #: flow mode's fast-forward of steady worker-by-worker runs (None: off)
        self.ff = FastForward() if (fast_forward and mode == "flow" and network_policy is None
                                    and schedule != "coflows" and self.compute_noise == 0) else None
        if mode == "flow":
            self.known_flow = lambda fid: self._net.row_of(fid) is not None
            self.state.coflow_sync = self._sync_coflows
            self.state.flow_arrays = self._flow_arrays

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        """Simulate until every job has finished or nothing more can happen."""
        heap = self._heap
        while True:
            if self.settling and (not heap or heap[0][0] > self.state.now + self.SETTLE_S):
                self.deliver_settled()  # this instant has settled (its decisions may add work: look again)
                continue
            if not (heap and self.unfinished > 0):
                break
            if self.until_s is not None and heap[0][0] > self.until_s:
                self._advance(self.until_s)
                break
            t, item = self.pop()
            kind = item[0]
            if kind == "net":
                if item[1] != self._net_version:
                    continue
                self._advance(t)
                self._net_step()
            elif kind in _RUN_EVENTS:
                jid, ver = item[1], item[2]
                run = self._runs.get(jid)
                if run is None or run.version != ver or (kind == "ffend" and run.frozen is None):
                    continue  # stale: the run it belongs to stopped, restarted or left its window
                self._advance(t)
                self._run_event(t, kind, jid, run, item[3:])
            else:
                self._advance(t)
                self.handle(t, item)
                continue
            self.drain()
        self._advance(self.state.now)
        if self.mode == "analytic":
            for jid in list(self.state.running):
                self._sync_analytic(jid)
        return SimResult(
            records=[self.records[j] for j in sorted(self.records)],
            decision_times_s=np.asarray(self.decision_times, dtype=float),
            events=self.events,
            end_time_s=self.state.now,
            busy_gpu_intervals=self.busy,
            iterations_done=dict(self.done_iters),
            type_gpu_seconds=dict(self.type_gpu_seconds),
            summary={} if self.mode != "flow" else {"fast_forward": {
                "enabled": self.ff is not None, "windows": self.ff.windows if self.ff else 0,
                "iterations_skipped": self.ff.skipped if self.ff else 0}},
        )

    def job_extra(self, jid: int) -> None:
        """No columns beyond the common job record (:class:`raytestbed.core.backend.LiveBooks`)."""
        return None

    def _advance(self, t: float) -> None:
        """Move the clock to ``t``, progressing flows in flow mode."""
        if t < self.state.now - 1e-9:
            raise RuntimeError(f"time went backwards: {t} < {self.state.now}")
        if self._net is not None:
            self._net.advance(t)
        self.state.now = max(self.state.now, t)

    def drain(self) -> None:
        """Deliver the queued events (bytes sent brought up to date first, flow mode)."""
        if self._net is not None and self._immediate:
            self._sync_sent()
        super().drain()
        if self._retime:  # (once for the events just delivered: the rates depend only on the flows now)
            self._retime = False
            self._reallocate()

    def _sync_sent(self) -> None:
        """Copy the flows' bytes sent into the running jobs' ``bytes_sent`` (what policies read)."""
        running = self.state.running
        jid_of = self._net.jid_of_rank
        for r, sent in self._net.take_sent():
            rj = running.get(int(jid_of[r]))
            if rj is not None:
                rj.bytes_sent = sent

    # ------------------------------------------------------------- event-core hooks
    @property
    def slows_nics(self) -> bool:
        return self.mode == "flow"

    def slow_nic(self, server: int, factor: float) -> None:
        self._net.set_nic_factor(server, factor)
        self._reallocate()  # no event follows: re-time the flows in flight now

    def after_event(self, event: Event) -> None:
        if self._net is not None:
            self._retime = True  # re-time the flows once the queued events are delivered (:meth:`drain`)

    def set_weights(self, pol: Policy, weights: dict[int, float]) -> None:
        if self._net is None:
            raise PolicyError(f"{pol.name}: SetFlowWeights needs timing mode 'flow'")
        for jid, w in weights.items():
            if jid in self._net.rank_of:
                self._net.set_job_weight(jid, w)
        self._net.stale = True

    def set_rates(self, pol: Policy, rates) -> None:
        if self._net is None:
            raise PolicyError(f"{pol.name}: SetFlowRates needs timing mode 'flow'")
        try:
            self._net.set_policy_rates(rates)
        except PolicyError as e:
            raise PolicyError(f"{pol.name}: {e}") from None

    def run_started(self, job: Job, placement: Placement) -> None:
        now = self.state.now
        run = self._runs.setdefault(job.job_id, _Run())
        run.version += 1
        run.last_s = now
        run.restore_until = self.restore_until(job.job_id)
        if self.mode == "analytic":
            if self.model.contention_dependent:
                self._reprice_all()
            else:
                self._price(job.job_id)
        else:
            self._net.start_job(job.job_id)
            run.workers = None
            run.placed = self.speeds.placed_job(job, placement)
            if run.restore_until > now:  # restoring its checkpoint: the run starts when that is done
                self.push(run.restore_until, P_DONE, ("restored", job.job_id, run.version))
            else:
                self._begin_flow_run(job, placement, run)

    def _run_event(self, t: float, kind: str, jid: int, run: _Run, args: tuple) -> None:
        """A timed event of job ``jid``'s current run, at ``t`` (now): its end (``finish``), its compute
        done (``compute``: the cycle's first coflow starts), its checkpoint restored, its fast-forward
        window over (``ffend``), a worker's step due (``wstep``) or an iteration of a worker-by-worker
        run ended (``witer``)."""
        if kind == "finish":
            self.finish(jid)
            return
        if kind == "compute":
            self._start_coflow(jid, 0)
        elif kind == "restored":
            rj = self.state.running[jid]
            self._begin_flow_run(rj.job, rj.placement, run)
        elif kind == "ffend":
            self._ff_close(jid)
        elif kind == "wstep":
            # the steps of this run due at this instant that come next in the queue, at once: between
            # two of them nothing else happens (a step queues no event for the policies), so the flows
            # are re-timed once
            idxs, heap = [args[0]], self._heap
            while self.batch_steps and heap and not self._immediate:
                t2, _, _, nxt = heap[0]
                if t2 != t or nxt[0] != "wstep" or nxt[1] != jid or nxt[2] != run.version:
                    break
                heapq.heappop(heap)
                idxs.append(nxt[3])
            run.workers.resume(t, *idxs)
        else:
            self._worker_iteration(jid, *args)
        self._reallocate()

    def _begin_flow_run(self, job: Job, placement: Placement, run: _Run) -> None:
        """Flow timing: start a run of ``job`` now, worker by worker or as coflows."""
        run.cycle_start_s = self.state.now
        # a ring whose replicas compute at different speeds runs worker by worker too: its fast replicas
        # start their all-reduce steps early, which one job-wide coflow cannot show
        rings = self.schedule == "transfers" or (run.placed is not job and job.traffic is None
                                                  and self.speeds.mixed(placement))
        if self.schedule != "coflows" and uses_workers(job, rings=rings):
            run.workers = self._worker_run(job, placement, run)
            run.workers.batched = self.batch_steps
            run.servers = run.workers.servers
            run.frozen = None
            self._worker_jobs.add(job.job_id)
            run.workers.begin()
        else:
            run.workers = None
            run.traffic = iteration_traffic(run.placed, placement, self.cluster)
            run.cycle_lb = math.nan
            run.servers = frozenset(int(v) for src, dst, _ in run.traffic.arrays for v in (*src, *dst))
            self._begin_cycle(job.job_id)

    def run_stopped(self, jid: int) -> None:
        if self.mode == "analytic":
            self._sync_analytic(jid)
        else:
            self._drop_flows(jid)
        run = self._runs[jid]
        run.version += 1
        run.alpha = math.nan

    def run_finished(self, jid: int) -> None:
        if self.mode == "flow":
            self._drop_flows(jid)
        self.done_iters[jid] = float(self.jobs[jid].iterations)
        self._runs.pop(jid, None)

    def before_tick(self) -> None:
        """Analytic timing: show every running job's iterations done as of now (the view only; the
        progress books are kept as they are, so results do not depend on how often policies look)."""
        if self.mode != "analytic":
            return
        now = self.state.now
        for jid, rj in self.state.running.items():
            run = self._runs[jid]
            if math.isfinite(run.alpha):
                done = self.done_iters[jid] + max(0.0, now - max(run.last_s, run.restore_until)) / run.alpha
                rj.iterations_done = min(float(self.jobs[jid].iterations), done)

    def after_release(self) -> None:
        if self.model.contention_dependent and self.mode == "analytic":
            self._reprice_all()

    # ------------------------------------------------------------ analytic mode
    def _remaining(self, jid: int) -> float:
        """Steps running job ``jid`` still has to make (:meth:`EventCore.steps_left`)."""
        return self.steps_left(jid)

    def progress_now(self, jid: int) -> float:
        run = self._runs.get(jid)
        if self.mode != "analytic" or jid not in self.state.running or run is None or not math.isfinite(run.alpha):
            return super().progress_now(jid)
        return self.credit(jid, self.done_iters[jid], (self.state.now - run.last_s) / run.alpha)

    def _price(self, jid: int) -> None:
        """(Re)compute a running job's iteration time and schedule its finish (analytic mode)."""
        rj = self.state.running[jid]
        run = self._runs[jid]
        alpha = self.model.iteration_time(rj.job, rj.placement, self.cluster, OtherJobs(self.state.running, jid))
        if not (alpha > 0 and math.isfinite(alpha)):
            raise RuntimeError(f"job {jid}: iteration time {alpha} from model {self.model.name}")
        changed = alpha != run.alpha
        run.alpha = alpha
        run.last_s = self.state.now
        run.version += 1
        rj.iteration_time_s = alpha
        self.records[jid].iteration_time_s = alpha
        begin = max(self.state.now, run.restore_until)
        self.push(begin + self._remaining(jid) * alpha, P_DONE, ("finish", jid, run.version))
        if changed:
            self.emit(IterationMeasured(self.state.now, jid, alpha, compute_s=math.nan, comm_s=math.nan))

    def _sync_analytic(self, jid: int) -> None:
        run = self._runs[jid]
        if math.isfinite(run.alpha):
            steps = max(0.0, self.state.now - max(run.last_s, run.restore_until)) / run.alpha
            self.done_iters[jid] = self.credit(jid, self.done_iters[jid], steps)
            self.state.running[jid].iterations_done = self.done_iters[jid]
        run.last_s = self.state.now

    def _reprice_all(self) -> None:
        for jid in list(self.state.running):
            self._sync_analytic(jid)
        for jid in list(self.state.running):
            self._price(jid)

    # ------------------------------------------------------------ flow mode
    def _begin_cycle(self, jid: int) -> None:
        """Start the compute phase of the next cycle (q iterations)."""
        run = self._runs[jid]
        run.coflow_idx = -1
        run.cycle_start_s = self.state.now
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        self._add_lower_bound(jid, q * run.traffic.compute_s)
        self.push(self.state.now + q * run.traffic.compute_s, P_DONE, ("compute", jid, run.version))

    def _add_lower_bound(self, jid: int, seconds: float) -> None:
        rec = self.records[jid]
        rec.lower_bound_s = seconds if math.isnan(rec.lower_bound_s) else rec.lower_bound_s + seconds

    def _start_coflow(self, jid: int, idx: int) -> None:
        run = self._runs[jid]
        traffic = run.traffic
        if idx >= len(traffic.coflows):
            self._end_cycle(jid)
            return
        run.coflow_idx = idx
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        cf_id = (jid, run.cycle, idx)
        src, dst, nbytes = traffic.coflow_arrays(run.cycle, idx)
        same = src == dst
        intra = float((nbytes[same] * q / self.cluster.intra_bps).max()) if same.any() else 0.0
        self._add_lower_bound(jid, max(intra, q * float(o3_gamma(src, dst, nbytes, self._egress, self._ingress)[0])))
        total = self._net.add_coflow(jid, cf_id, src, dst, nbytes * q, self.state.now)
        self.emit_settled(CoflowStarted(self.state.now, jid, cf_id, total))

    def _end_cycle(self, jid: int) -> None:
        run = self._runs[jid]
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        run.cycle += 1
        if not self._iterations_ended(jid, q, run.traffic.compute_s, None):
            self._begin_cycle(jid)

    def _iterations_ended(self, jid: int, q: int, compute_s: float, comm_s: float | None) -> bool:
        """``q`` iterations of running job ``jid`` ended now, since ``cycle_start_s``: count them, report
        their mean time (``comm_s`` None: the time beyond ``compute_s``) and finish the job if it has
        no iterations left (True then)."""
        run = self._runs[jid]
        now = self.state.now
        self.done_iters[jid] = self.credit(jid, self.done_iters[jid], q)
        rj = self.state.running[jid]
        rj.iterations_done = self.done_iters[jid]
        per_iter = (now - run.cycle_start_s) / q
        run.cycle_start_s = now
        rj.iteration_time_s = per_iter
        self.records[jid].iteration_time_s = per_iter
        self.emit(IterationMeasured(now, jid, per_iter, compute_s=compute_s,
                                     comm_s=per_iter - compute_s if comm_s is None else comm_s))
        if self._remaining(jid) > 1e-9:
            return False
        run.version += 1
        self.finish(jid)
        return True

    def _drop_flows(self, jid: int) -> None:
        if jid in self._runs:
            self._net.drop_job(jid)
            self._worker_jobs.discard(jid)
            self._runs[jid].frozen = None

    # ------------------------------------------------ flow mode: pipeline and PS jobs worker by worker
    def _worker_run(self, job: Job, placement: Placement, run: _Run) -> WorkerRun:
        """A run of ``job`` worker by worker, whose transfers are this network's flows
        (:mod:`raytestbed.sim.pipeline_workers`)."""
        jid, ver, net = job.job_id, run.version, self._net

        def start_flows(transfers) -> np.ndarray:
            return net.add_flows(jid, (jid, ver, 0), [x.src_server for x in transfers],
                                 [x.dst_server for x in transfers], [x.nbytes for x in transfers], self.state.now)

        def wake_at(t: float, idx: int) -> None:
            self.push(t, P_DONE, ("wstep", jid, ver, idx))

        def iteration_at(t: float, compute_s: float, comm_s: float) -> None:
            self.push(t, P_DONE, ("witer", jid, ver, compute_s, comm_s))

        def coflow_event(kind: str, cf_id: tuple, nbytes: float) -> None:
            if kind == "started":
                self.emit_settled(CoflowStarted(self.state.now, jid, cf_id, nbytes))
            elif kind == "grew":
                self.emit_settled(CoflowGrew(self.state.now, jid, cf_id, nbytes))
            else:
                self.state.running[jid].coflows_done += 1
                self.emit_settled(CoflowFinished(self.state.now, jid, cf_id, nbytes))

        n = max(1, math.ceil(self._remaining(jid) / self.q - 1e-9))
        return WorkerRun(job, placement, self.cluster, n, self.state.now, start_flows,
                           lambda uids, shares: net.set_shares(jid, uids, shares), wake_at, iteration_at,
                           coflow_event, scale=self.q, start_iteration=int(round(self.done_iters[jid])),
                           speeds=self.speeds, compute_noise=self.compute_noise,
                           noise_seed=self.noise_seed)

    def _worker_flows_done(self, ranks: np.ndarray, uids: np.ndarray) -> None:
        """Hand the ended flows (``ranks``: their jobs' ranks, non-decreasing) of worker-by-worker runs to
        their runs, by job."""
        ranks, uids = ranks.tolist(), uids.tolist()
        a, n = 0, len(ranks)
        while a < n:
            r, b = ranks[a], a + 1
            while b < n and ranks[b] == r:
                b += 1
            run = self._runs.get(int(self._net.jid_of_rank[r]))
            if run is not None and run.workers is not None:
                run.workers.flows_done(self.state.now, uids[a:b])
            a = b

    def _worker_iteration(self, jid: int, compute_s: float, comm_s: float) -> None:
        """An iteration of a worker-by-worker run ended now (every worker finished it)."""
        self._add_lower_bound(jid, self.q * max(st.profile.compute_s for st in self._runs[jid].placed.stages))
        if not self._iterations_ended(jid, self.q, compute_s / self.q, comm_s / self.q) and self.ff is not None:
            self._ff_look(jid, compute_s, comm_s)

    # ------------------------------------------------ flow mode: fast-forward (sim/fastforward.py)
    def _ff_group(self, jid: int) -> list[int]:
        """The running jobs whose transfers may share a link with running job ``jid``'s, directly or
        through others (jobs of two or more servers with a server in common), ``jid`` among them; by id."""
        runs = {k: self._runs[k] for k in self.state.running if k in self._runs}
        group, todo = {jid}, [jid]
        while todo:
            s = runs[todo.pop()].servers
            if len(s) < 2:
                continue
            for k, o in runs.items():
                if k not in group and len(o.servers) >= 2 and o.servers & s:
                    group.add(k)
                    todo.append(k)
        return sorted(group)

    def _ff_look(self, jid: int, compute_s: float, comm_s: float) -> None:
        """Worker-by-worker run ``jid`` ended an iteration now. With the runs that may share its links
        (its group; the lowest job id's iteration ends count) record their state; if it repeats and
        nothing can change on their links for whole periods, skip them."""
        group = self._ff_group(jid)
        if jid != group[0]:
            return
        runs = [self._runs[k] for k in group]
        if any(r.workers is None or r.frozen is not None for r in runs):
            return
        ff, net, now = self.ff, self._net, self.state.now
        shape, vals = [len(group)], [compute_s, comm_s]
        for k, run in zip(group, runs):
            sh, vs = run.workers.signature(now)
            rows = np.flatnonzero((net.rank == net.rank_of[k]) & net.alive)
            shape += (sh, rows.size)
            vals += (*vs, *net.rem[rows].tolist(), *net.share[rows].tolist())
        mark = Mark(now, tuple(shape), tuple(vals), tuple(r.workers.coflows_finished for r in runs),
                    tuple(float(net.done[net.rank_of[k]]) for k in group),
                    tuple(r.workers.iterations_completed for r in runs))
        key = tuple(group)
        found = ff.add(key, mark)
        if found is None:
            return
        n, period = found
        per = ff.periods(key, n)
        if per is None:
            return
        m = ff.whole_periods(self._ff_horizon(group) - now, period)
        for run, (_, _, iters) in zip(runs, per):
            wr = run.workers
            depth = max(getattr(w.spec, "in_flight", 1) for w in wr.participants) + 1
            m = min(m, (wr.limit - wr.iterations_completed - ff.margin - depth) // iters)
        if m * min(it for _, _, it in per) < ff.min_iterations:
            return
        self._ff_open(group, m, per, m * period)

    def _ff_horizon(self, group: list[int]) -> float:
        """The earliest time anything may change on the links of running jobs ``group`` (seconds): the next
        arrival, tick, wake-up or fault, the horizon, and every other running job's earliest finish
        (a lower bound: the compute it has left, :mod:`raytestbed.sim.fastforward`)."""
        now = self.state.now
        t = min((e[0] for e in self._heap if e[3][0] in ("arrival", "tick", "wake", "kill_server", "slow_nic")),
                default=math.inf)
        if self.until_s is not None:
            t = min(t, self.until_s)
        for k, run in self._runs.items():
            if k in group or k not in self.state.running:
                continue
            if run.frozen is not None:
                t = min(t, run.frozen[0])
            elif run.workers is not None:
                wr = run.workers
                left = wr.limit - wr.iterations_completed
                depth = max(getattr(w.spec, "in_flight", 1) for w in wr.participants) + 1
                per = max((w.spec.profile.fwd_s + w.spec.profile.bwd_s) / w.spec.speed * self.q for w in wr.workers)
                t = min(t, now + max(0, left - depth - 1) * per)
            elif run.traffic is not None:
                cycles = math.ceil(self._remaining(k) / self.q - 1e-9)
                t = min(t, now + max(0, cycles - 2) * self._cycle_lower_bound(run))
            else:
                t = now
        return t

    def _cycle_lower_bound(self, run: _Run) -> float:
        """Seconds one whole cycle of a coflow run takes at least: its compute, then each coflow's
        stand-alone optimal time (O3, eq. 26, as its lower bound counts it; compute only where the
        coflows' sizes are drawn per cycle)."""
        if math.isnan(run.cycle_lb):
            traffic, q = run.traffic, self.q
            lb = q * traffic.compute_s
            if not traffic.random_sizes:
                for src, dst, nbytes in traffic.arrays:
                    if not nbytes.size:
                        continue
                    same = src == dst
                    intra = float((nbytes[same] * q / self.cluster.intra_bps).max()) if same.any() else 0.0
                    lb += max(intra, q * float(o3_gamma(src, dst, nbytes, self._egress, self._ingress)[0]))
            run.cycle_lb = lb
        return run.cycle_lb

    def _ff_open(self, group: list[int], m: int, per: list[tuple[int, float, int]], dt: float) -> None:
        """Skip ``m`` periods (``dt`` seconds) of the runs of jobs ``group`` from now; ``per``: each one's
        coflows, bytes and iterations in one period. Their flows leave the network until the window
        ends, their times and pending events move ``dt`` later, the skipped iterations are credited now
        as their events would have (module :mod:`raytestbed.sim.fastforward`)."""
        ff, net, now = self.ff, self._net, self.state.now
        heap = self._heap
        ids = set(group)
        def owned(e) -> bool:
            return e[3][0] in ("wstep", "witer") and e[3][1] in ids
        mine = sorted(e for e in heap if owned(e))
        if mine:
            heap[:] = [e for e in heap if not owned(e)]
            heapq.heapify(heap)
        for jid in group:
            self.push(now + dt, P_DONE, ("ffend", jid, self._runs[jid].version))
        for t, prio, _, item in mine:
            self.push(t + dt, prio, item)
        for jid, (coflows, nbytes, iters) in zip(group, per):
            run = self._runs[jid]
            skip = m * iters
            run.frozen = (now + dt, net.detach(jid))
            run.workers.shift(dt, skip)
            run.cycle_start_s += dt
            bound = self.q * max(st.profile.compute_s for st in self._runs[jid].placed.stages)
            for _ in range(skip):  # (as the skipped iterations' events would have added them, in order)
                self._add_lower_bound(jid, bound)
                self.done_iters[jid] = self.credit(jid, self.done_iters[jid], self.q)
            rj = self.state.running[jid]
            rj.iterations_done = self.done_iters[jid]
            rj.coflows_done += m * coflows
            r = net.rank_of[jid]
            net.done[r] += m * nbytes
            net.mark_sent(r)
            ff.skipped += skip
        ff.shift(tuple(group), dt)
        ff.windows += 1

    def _ff_close(self, jid: int) -> None:
        """Job ``jid``'s fast-forward window ended now: its flows come back as they were."""
        run = self._runs[jid]
        _, saved = run.frozen
        run.frozen = None
        self._net.attach(jid, saved)
        run.workers.now = self.state.now

    def _net_step(self) -> None:
        """Complete every flow that has (numerically) no bytes left, then the coflows left without flows."""
        net = self._net
        emptied = net.complete()
        running = self.state.running
        jid_of = net.jid_of_rank
        self._sync_sent()
        if self._worker_jobs and net.ended[1].size:
            self._worker_flows_done(*net.ended)
        for r in emptied:
            jid = int(jid_of[r])
            run = self._runs[jid]
            if run.workers is not None:
                continue
            cf_id, _, _, total = net.end_coflow(r)
            running[jid].coflows_done += 1
            self.emit_settled(CoflowFinished(self.state.now, jid, cf_id, total))
            self._start_coflow(jid, run.coflow_idx + 1)
        self._reallocate()

    def _reallocate(self) -> None:
        """Recompute flow rates (only if their inputs changed, :meth:`FlowNet.reallocate`) and schedule
        the next flow completion. Cost: O(active flows) of array operations plus one allocation over
        the server pairs in use."""
        net = self._net
        if net is None:
            return
        self._net_version += 1
        if len(net) == 0:
            net.stale = True
            return
        net.reallocate()
        when = net.next_completion()  # (the earliest anchored finish time, as the emulator's fluid model's)
        if math.isfinite(when):
            # a flow whose new rate ends it within the clock's resolution ends now (FlowNet.complete)
            self.push(max(when, self.state.now), P_DONE, ("net", self._net_version))

    def _sync_coflows(self) -> None:
        """Bring ``state.coflows`` up to date with the flows' bytes left now (the view calls this)."""
        infos = self._net.coflow_infos()
        if infos is not self._coflows_synced:
            self._coflows_synced = infos
            self.state.coflows.clear()
            self.state.coflows.update(infos)

    def _flow_arrays(self):
        """The active flows as arrays (``view.flows()``), bytes left as of now."""
        running = self.state.running
        return self._net.table(_SentOf(running))


class _SentOf:
    """job id -> bytes sent so far (``RunningJob.bytes_sent``)."""

    __slots__ = ("_running",)

    def __init__(self, running) -> None:
        self._running = running

    def __getitem__(self, jid: int) -> float:
        return self._running[jid].bytes_sent
