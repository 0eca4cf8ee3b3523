"""The scheduler actor: any :class:`~raytestbed.schedulers.base.Policy`, unchanged, driving the emulated cluster.

:class:`SchedulerCore` (plain Python, no Ray) keeps a :class:`~raytestbed.core.state.ClusterState`,
feeds the policies the same events as the simulator and validates and books their decisions;
:class:`SchedulerActor` is the Ray actor around it. The actor

* replays arrivals, faults and ticks in **emulated** time (``TimeScale``: emulated seconds per
  wall second) from its own asyncio clock;
* is the executors' *reporter*: ``on_iteration`` / ``on_job_done`` / ``on_job_failed`` calls from
  running jobs become ``IterationMeasured`` / ``JobFinished`` / ``JobFailed`` events, stamped with
  the emulated time they happened on the executors' logical clocks (failures: when they arrive;
  see :class:`SchedulerActor`, "Logical timestamps");
* polls the fabric (``stats()``) every ``poll_s`` wall seconds for bytes sent per job and coflow
  start/end, which become ``CoflowStarted`` / ``CoflowFinished`` events;
* turns decisions into *actions* (start a job's executors, stop them, kill a server, set fabric
  weights or rates) that the backend (:mod:`raytestbed.emu.backend`) executes with the
  EmuCluster; the GPU books are kept here, so a policy sees its decision applied at once.

Events delivered: JobArrived, JobStarted, JobFinished, JobFailed, IterationMeasured (measured:
``seconds`` = wall time of the iteration in emulated seconds, with its compute and communication
parts), CoflowStarted/CoflowFinished (from the fabric), Tick (periodic, and one per WakeUp
decision), ServerLost.

Estimates refreshed from measurements (what a policy reads in the ClusterView):

* ``running[j].iteration_time_s``: mean of the last ``window`` measured iteration times of the
  job's current run (the first iteration of a run, which includes filling the pipeline, is left
  out once later ones exist); the same value is the job's ``iteration_time_s`` in ``jobs.csv``.
  A-SRPT's α for a running job (its per-iteration time) therefore comes from measurements, and
  every measurement is also delivered as ``IterationMeasured`` so policies keeping their own
  estimators (e.g. online refits of iteration predictors) see each one;
* ``running[j].iterations_done``: iterations reported by the executors (exact counts);
* ``running[j].bytes_sent``: bytes the fabric paced for the job (updated every poll);
* predictions of the *number* of iterations are the policy's business (``JobFinished`` carries
  the true count, as in the simulator). Jobs not yet started keep their profile-based estimates.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import re
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import DecisionBook, JobRecord
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterState, RunningJob
from raytestbed.schedulers.base import (
    CoflowFinished,
    CoflowStarted,
    Decision,
    Event,
    IterationMeasured,
    JobArrived,
    JobFailed,
    JobFinished,
    JobStarted,
    Policy,
    Preempt,
    Resize,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    Tick,
    WakeUp,
)
from raytestbed.core.events import Fault


# timed-event priorities at equal time (as in the simulator: faults, arrivals, ticks)
_P_FAULT, _P_ARRIVAL, _P_TICK = 1, 2, 3


@dataclass
class Action:
    """Something the backend must do on the emulated cluster, in order."""

    kind: str  # start | stop | kill | weights | rates
    job_id: int | None = None
    job: Job | None = None
    placement: Placement | None = None
    iterations: int = 0  # start: iterations this run performs
    start_iteration: int = 0
    run_id: int = 0  # start: id of this run of the job (reports of older runs are dropped)
    start_s: float = 0.0  # start: the decision's time (the trial's emulated seconds)
    server: int | None = None
    data: dict | None = None


@dataclass
class Batch:
    """What the backend receives from one poll of the scheduler."""

    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    decisions: list[tuple[Event, str, float, list[Decision]]] = field(default_factory=list)
    records: dict[int, JobRecord] = field(default_factory=dict)  #: records changed since the last poll
    busy: list[tuple[int, float, float, int]] = field(default_factory=list)  #: new GPU-holding intervals
    measured: dict[int, dict[str, float]] = field(default_factory=dict)  #: stats of jobs finished in this batch
    done: bool = False

    def empty(self) -> bool:
        return not (self.actions or self.events or self.decisions or self.done)


class SchedulerCore:
    """Policies + cluster state + event dispatch in emulated time (no Ray; unit-testable).

    Args:
        cluster: the emulated cluster.
        jobs: the jobs to run (arrivals replayed at ``arrival_s``).
        policies: placement policy, optionally followed by a network policy.
        faults: faults to inject (``kill_server`` at emulated ``time_s``).
        window: measured iterations averaged into ``iteration_time_s``.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policies: Sequence[Policy],
                 faults: Sequence[Fault] = (), window: int = 10) -> None:
        self.cluster = cluster
        self.jobs = {j.job_id: j for j in jobs}
        self.policies = list(policies)
        self.window = window
        self.state = ClusterState(cluster)
        self.view = self.state.view()
        self.records = {j.job_id: JobRecord(j) for j in jobs}
        self.book = DecisionBook(self.state, self.records, self._busy_closed)
        self.done_iters: dict[int, int] = {j.job_id: 0 for j in jobs}
        self._run_iters: dict[int, list[float]] = {}  # current run's measured iteration times
        self.measured: dict[int, list[tuple]] = {j.job_id: [] for j in jobs}  # (t, iteration, iter_s, comp, comm)
        self.decision_times: list[float] = []
        self.events = 0
        self.unfinished = len(jobs)
        self.warnings: list[str] = []
        self._timed: list = []
        self._seq = 0
        self._immediate: deque[Event] = deque()
        self._out = Batch()
        self._coflows_seen: dict[str, bool] = {}
        self._run_id: dict[int, int] = {}  # job id -> id of its current run
        self._runs_started = 0
        for j in sorted(jobs, key=lambda j: (j.arrival_s, j.job_id)):
            self._push(j.arrival_s, _P_ARRIVAL, ("arrival", j.job_id))
        for f in faults:
            if f.kind != "kill_server":
                raise ValueError(f"unknown fault kind {f.kind!r}")
            self._push(f.time_s, _P_FAULT, ("kill_server", f.target))
        self.tick = min((p.tick_interval_s for p in self.policies if p.tick_interval_s), default=None)
        if self.tick is not None:
            self._push(0.0, _P_TICK, ("tick",))

    # ------------------------------------------------------------ clock
    def _push(self, t: float, prio: int, item: tuple) -> None:
        self._seq += 1
        heapq.heappush(self._timed, (t, prio, self._seq, item))

    def next_timed(self) -> float | None:
        """Emulated time of the next arrival/fault/tick, or None."""
        return self._timed[0][0] if self._timed else None

    def _advance(self, t: float) -> float:
        self.state.now = max(self.state.now, t)
        return self.state.now

    def finished(self) -> bool:
        """True when every job finished, or nothing can happen any more (no running job, no
        arrival or fault ahead, and the last tick changed nothing)."""
        if self.unfinished == 0:
            return True
        if self.state.running or self._immediate:
            return False
        if any(item[0] != "tick" for _, _, _, item in self._timed):
            return False  # arrivals, faults or wake-ups ahead
        return self.tick is None or not self._tick_useful

    _tick_useful = True

    def due(self, now: float) -> None:
        """Handle every timed event due at emulated time ``now``."""
        while self._timed and self._timed[0][0] <= now:
            t, _, _, item = heapq.heappop(self._timed)
            t = self._advance(t)
            kind = item[0]
            if kind == "arrival":
                job = self.jobs[item[1]]
                self.state.pending[job.job_id] = job
                self._emit(JobArrived(t, job))
            elif kind == "kill_server":
                self._kill_server(item[1])
            elif kind == "tick":
                before = len(self._out.actions)
                self._emit(Tick(t))
                self._drain()
                self._tick_useful = len(self._out.actions) > before or bool(self.state.running)
                if self.unfinished > 0 and (self._tick_useful or any(i[3][0] != "tick" for i in self._timed)):
                    self._push(t + self.tick, _P_TICK, ("tick",))
                continue
            elif kind == "wake":
                self._emit(Tick(t))
            self._drain()

    # ------------------------------------------------------------ reports from executors
    def _current(self, job_id: int, run_id: int | None) -> bool:
        """True if ``job_id`` is running and the report comes from its current run (None: unknown run)."""
        if job_id not in self.state.running:
            return False
        return run_id is None or self._run_id.get(job_id) == run_id

    def on_iteration(self, now: float, job_id: int, iteration: int, iter_s: float, compute_s: float,
                     comm_s: float, run_id: int | None = None) -> None:
        if not self._current(job_id, run_id):
            return  # a late report of a stopped run
        rj = self.state.running[job_id]
        now = self._advance(now)
        runs = self._run_iters.setdefault(job_id, [])
        runs.append(float(iter_s))
        self.done_iters[job_id] = min(self.jobs[job_id].iterations, self.done_iters[job_id] + 1)
        rj.iterations_done = self.done_iters[job_id]
        tail = runs[1:] if len(runs) > 1 else runs
        est = float(np.mean(tail[-self.window:]))
        rj.iteration_time_s = est
        self.records[job_id].iteration_time_s = est
        self.measured[job_id].append((now, int(iteration), float(iter_s), float(compute_s), float(comm_s)))
        self._emit(IterationMeasured(now, job_id, float(iter_s), compute_s=float(compute_s), comm_s=float(comm_s)))
        self._drain()

    def on_job_done(self, now: float, job_id: int, iterations_done: int, run_id: int | None = None) -> None:
        if not self._current(job_id, run_id):
            return
        self._advance(now)
        self._finish(job_id)
        self._drain()

    def on_job_failed(self, now: float, job_id: int, reason: str, run_id: int | None = None) -> None:
        if not self._current(job_id, run_id):
            return  # already handled (e.g. its server was killed by an injected fault), or an old run
        now = self._advance(now)
        self._stop(job_id, "failures")
        self._emit(JobFailed(now, job_id, reason))
        self._drain()

    def on_fabric_stats(self, now: float, stats: dict, fabric_to_trial_s: float | None = None) -> None:
        """Bytes sent per job, and coflow start/finish events, from ``Fabric.stats()``.

        ``fabric_to_trial_s``: add to a fabric time (its ``start_s``/``end_s``) to get the trial's
        emulated time; given, each coflow event is stamped when it happened on the fabric (no
        later than ``now``), else at ``now``. Stats do not move the clock otherwise.
        """
        def stamp(t) -> float:
            if fabric_to_trial_s is None or t is None:
                return now
            return min(now, float(t) + fabric_to_trial_s)

        seen: list[tuple] = []  # (time, started 0 / finished 1, order, event class, job, coflow, bytes)
        for jid, b in (stats.get("bytes_sent") or {}).items():
            rj = self.state.running.get(int(jid))
            if rj is not None:
                rj.bytes_sent = float(b)
        for cid, info in (stats.get("coflows") or {}).items():
            jid = info.get("job_id")
            if jid is None:
                m = re.search(r"\d+", str(cid))
                jid = int(m.group()) if m else None
            if jid is None or int(jid) not in self.jobs:
                continue
            jid = int(jid)
            key = str(cid)
            nbytes = float(info.get("bytes", 0.0))
            ended = info.get("end_s") is not None
            if key not in self._coflows_seen:
                self._coflows_seen[key] = False
                seen.append((stamp(info.get("start_s")), 0, len(seen), CoflowStarted, jid, key, nbytes))
            if ended and not self._coflows_seen[key]:
                self._coflows_seen[key] = True
                if jid in self.state.running:
                    self.state.running[jid].coflows_done += 1
                seen.append((stamp(info.get("end_s")), 1, len(seen), CoflowFinished, jid, key, nbytes))
        for t, _, _, kind, jid, key, nbytes in sorted(seen):  # in the order they happened
            self._emit(kind(self._advance(t), jid, (key,), nbytes))
            self._drain()

    # ------------------------------------------------------------ dispatch
    def _emit(self, ev: Event) -> None:
        self._immediate.append(ev)

    def _drain(self) -> None:
        while self._immediate:
            ev = self._immediate.popleft()
            self.events += 1
            self._out.events.append(ev)
            for pol in self.policies:
                t0 = time.perf_counter()
                decisions = pol.on_event(ev, self.view)
                dt = time.perf_counter() - t0
                self.decision_times.append(dt)
                if decisions:
                    self._out.decisions.append((ev, pol.name, dt, list(decisions)))
                    for d in decisions:
                        self._apply(d, pol)
            if isinstance(ev, JobArrived):
                self.book.note_predictions(ev.job.job_id, self.policies)

    def _apply(self, d: Decision, pol: Policy) -> None:
        job = self.book.check(d, pol.name)
        if isinstance(d, StartJob):
            self._start(job, d.placement)
        elif isinstance(d, Preempt):
            self._stop(d.job_id, "preemptions")
        elif isinstance(d, Resize):
            self._stop(d.job_id)
            self._start(job, d.placement)
        elif isinstance(d, WakeUp):
            self._push(self.book.wake_time(d, self.state.now), _P_TICK, ("wake",))
        elif isinstance(d, SetFlowWeights):
            self._out.actions.append(Action("weights", data={int(k): float(v) for k, v in d.weights.items()}))
        elif isinstance(d, SetFlowRates):
            self._out.actions.append(Action("rates", data=dict(d.rates)))

    # ------------------------------------------------------------ lifecycle (GPU books: DecisionBook)
    def _start(self, job: Job, placement: Placement) -> None:
        now = self.state.now
        done = self.done_iters[job.job_id]
        self.book.start(job, placement, done)
        self._run_iters[job.job_id] = []
        self._out.records[job.job_id] = self.records[job.job_id]
        self._runs_started += 1
        self._run_id[job.job_id] = self._runs_started
        self._out.actions.append(Action("start", job.job_id, job, placement, iterations=job.iterations - done,
                                        start_iteration=done, run_id=self._runs_started, start_s=now))
        self._emit(JobStarted(now, job.job_id, placement))

    def _busy_closed(self, jid: int, start_s: float, end_s: float, gpus: int) -> None:
        self._out.busy.append((jid, start_s, end_s, gpus))
        self._out.records[jid] = self.records[jid]

    def _stop(self, jid: int, count: str | None = None) -> RunningJob:
        """Take a running job off its GPUs, keeping its progress; it becomes pending; its executors stop.

        ``count``: the record counter to add one to (``preemptions`` / ``failures``), if any.
        """
        rj = self.book.stop(jid, count)
        self._run_iters.pop(jid, None)
        self._out.actions.append(Action("stop", jid))
        return rj

    def _finish(self, jid: int) -> None:
        now = self.state.now
        self.done_iters[jid] = self.jobs[jid].iterations
        self.book.finish(jid)
        self._run_iters.pop(jid, None)
        self.unfinished -= 1
        self._out.measured[jid] = self.measured_stats(jid)
        self._emit(JobFinished(now, jid, self.jobs[jid].iterations))

    def _kill_server(self, server: int) -> None:
        self._out.actions.append(Action("kill", server=server))
        for ev in self.book.kill_server(server, self._stop):
            self._emit(ev)

    # ------------------------------------------------------------ output
    def take(self) -> Batch:
        """The actions, events and record changes accumulated since the last call."""
        out, self._out = self._out, Batch()
        out.done = self.finished()
        return out

    def measured_stats(self, jid: int) -> dict[str, float]:
        """Per-job measured iteration statistics (emulated seconds); see :func:`measured_stats`."""
        return measured_stats(self.measured.get(jid) or [], self.records[jid].first_start_s)


def measured_stats(m: Sequence[tuple], first_start_s: float) -> dict[str, float]:
    """Statistics of one job's measured iterations ``(t, iteration, iter_s, compute_s, comm_s)``, emulated s.

    ``measured_start_overhead_s``: time from the job's first start to the end of its first iteration,
    minus that iteration's own time: launching the job's worker actors (an emulator cost that the
    simulator does not model).
    """
    nan = math.nan
    if not m:
        return {"measured_iterations": 0, "measured_iter_mean_s": nan, "measured_iter_p50_s": nan,
                "measured_compute_mean_s": nan, "measured_comm_mean_s": nan, "measured_start_overhead_s": nan}
    a = np.asarray([x[2:] for x in m], dtype=float)
    return {"measured_iterations": len(m), "measured_iter_mean_s": float(a[:, 0].mean()),
            "measured_iter_p50_s": float(np.median(a[:, 0])), "measured_compute_mean_s": float(a[:, 1].mean()),
            "measured_comm_mean_s": float(a[:, 2].mean()),
            "measured_start_overhead_s": max(0.0, float(m[0][0] - m[0][2] - first_start_s))}


class RunReporter:
    """The reporter handed to one run's executors: forwards to the scheduler actor, tagged with the run id.

    A plain picklable object (the executors call its methods, which issue the actor calls), so that
    reports of a stopped run that arrive after the job was restarted are recognised and dropped.
    """

    def __init__(self, actor, run_id: int) -> None:
        self.actor = actor
        self.run_id = run_id

    def on_iteration(self, job_id, iteration, iter_s, compute_s, comm_s, end_wall=None) -> None:
        self.actor.on_iteration.remote(job_id, iteration, iter_s, compute_s, comm_s, self.run_id, end_wall)

    def on_job_done(self, job_id, iterations_done, end_wall=None) -> None:
        self.actor.on_job_done.remote(job_id, iterations_done, self.run_id, end_wall)

    def on_job_failed(self, job_id, reason) -> None:
        self.actor.on_job_failed.remote(job_id, reason, self.run_id)

    def on_warning(self, job_id, message) -> None:
        self.actor.on_warning.remote(job_id, message)


class SchedulerActor:
    """Ray actor (async) around :class:`SchedulerCore`; also the executors' reporter.

    Create with ``ray.remote(SchedulerActor).options(num_cpus=0).remote(...)`` (see
    :mod:`raytestbed.emu.backend`). ``factor`` is the EmuCluster's time scale (emulated s per
    wall s) and ``fabric_epoch`` its clock's epoch (wall s); the trial's emulated clock starts at
    0 when :meth:`start` is called.

    **Logical timestamps.** Reports reach the actor some wall time after they happened (Ray calls,
    event-loop wake-ups: ~5-20 ms each on a 2-core host, more under load; an emulated cluster's
    control plane has none). The executors therefore send when an iteration or a run ended on
    their logical clocks (``end_wall``), and the fabric when each coflow started and ended; the
    core handles each report at that time (never later than now, never before the clock's last
    event: the core's clock only moves forward). Decisions taken then carry that time to the
    executors, which start the run's logical clock there (``start_job(start_s=...)``, at most
    ``MAX_BACKDATE_WALL_S`` ago). Arrivals, faults and ticks are replayed at their own times.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policies: Sequence[Policy],
                 faults: Sequence[Fault], factor: float, fabric=None, poll_s: float = 1.0,
                 fabric_epoch: float | None = None) -> None:
        self.core = SchedulerCore(cluster, jobs, policies, faults)
        self.factor = float(factor)
        self.fabric = fabric
        self.fabric_epoch = fabric_epoch
        self.poll_s = float(poll_s)
        self.epoch: float | None = None
        self._wake: asyncio.Event | None = None
        self._task = None
        self._error: BaseException | None = None

    def _now(self) -> float:
        return (time.time() - self.epoch) * self.factor if self.epoch is not None else 0.0

    def _stamp(self, end_wall: float | None) -> float:
        """The trial's emulated time of a report that happened at wall time ``end_wall`` (None: now)."""
        now = self._now()
        if end_wall is None or self.epoch is None:
            return now
        return min(now, (float(end_wall) - self.epoch) * self.factor)

    def _fabric_to_trial_s(self) -> float | None:
        """What to add to a fabric time to get the trial's emulated time (None: epoch unknown)."""
        if self.fabric_epoch is None or self.epoch is None:
            return None
        return (self.fabric_epoch - self.epoch) * self.factor

    def _signal(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> float:
        """Start the emulated clock (t = 0 now) and the arrival/fault/tick loop; returns the wall epoch."""
        self.epoch = time.time()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._clock())
        return self.epoch

    async def _clock(self) -> None:
        last_poll = time.monotonic()
        try:
            while not self.core.finished():
                nxt = self.core.next_timed()
                wait = 0.05 if nxt is None else min(0.05, max(0.0, (nxt - self._now()) / self.factor))
                if wait > 0:
                    await asyncio.sleep(wait)
                self.core.due(self._now())
                if self.fabric is not None and time.monotonic() - last_poll >= self.poll_s and self.core.state.running:
                    last_poll = time.monotonic()
                    try:
                        stats = await self.fabric.stats.remote()
                        self.core.on_fabric_stats(self._now(), stats, self._fabric_to_trial_s())
                    except Exception as e:  # the fabric is optional for the policies: note and go on
                        self.core.warnings.append(f"fabric stats: {type(e).__name__}: {e}")
                        self.fabric = None
                self._signal()
        except BaseException as e:  # a policy error: surface it at the next poll
            self._error = e
        self._signal()

    async def poll(self, timeout_s: float = 0.5) -> Batch:
        """Wait (up to ``timeout_s`` wall) for something to do; return it. Re-raises a policy error."""
        if self._error is None and self._wake is not None:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
        if self._error is not None:
            raise self._error
        return self.core.take()

    def _guard(self, fn, *args, now: float | None = None) -> None:
        try:
            fn(self._now() if now is None else now, *args)
        except BaseException as e:
            self._error = e
        self._signal()

    async def on_iteration(self, job_id: int, iteration: int, iter_s: float, compute_s: float, comm_s: float,
                           run_id: int | None = None, end_wall: float | None = None) -> None:
        self._guard(self.core.on_iteration, int(job_id), iteration, iter_s, compute_s, comm_s, run_id,
                    now=self._stamp(end_wall))

    async def on_job_done(self, job_id: int, iterations_done: int, run_id: int | None = None,
                          end_wall: float | None = None) -> None:
        self._guard(self.core.on_job_done, int(job_id), iterations_done, run_id, now=self._stamp(end_wall))

    async def on_job_failed(self, job_id: int, reason: str, run_id: int | None = None) -> None:
        self._guard(self.core.on_job_failed, int(job_id), reason, run_id)

    async def on_warning(self, job_id: int, message: str) -> None:
        self.core.warnings.append(str(message))

    async def result(self) -> dict[str, Any]:
        """Final books: decision times, event count, end time, measured iterations, warnings."""
        c = self.core
        return {"decision_times": np.asarray(c.decision_times, dtype=float), "events": c.events,
                "end_time_s": c.state.now, "measured": c.measured, "warnings": list(c.warnings),
                "records": c.records}
