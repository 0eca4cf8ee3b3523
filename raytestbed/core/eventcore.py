"""The event core both backends share: timed events, event dispatch to the policies, decisions applied.

:class:`EventCore` keeps the policies' world for one run — a
:class:`~raytestbed.core.state.ClusterState` (what the read-only ``ClusterView`` shows), the
:class:`~raytestbed.core.decisions.DecisionBook` (decision checks, GPU books, job records) — and

* a heap of **timed events** (arrivals, faults, periodic ticks, one-shot wake-ups; a backend may
  push its own kinds, e.g. the simulator's completions), ordered by time, then by priority
  (completions, faults, arrivals, ticks), then by insertion;
* the **dispatch** of every event to every policy (placement first, then network), timing each
  ``on_event`` call in wall seconds and applying its decisions at once, in order.

A backend subclasses it and adds only how time passes for running jobs, through the hooks
:meth:`run_started`, :meth:`run_stopped`, :meth:`run_finished`, :meth:`set_weights`,
:meth:`set_rates`, :meth:`after_event`. The simulator (:mod:`raytestbed.sim.engine`) computes
progress from models or the flow allocator; the emulator's scheduler
(:mod:`raytestbed.emu.scheduler`) starts and stops real executors on the virtual clock, whose heap
of timed items it is handed (``heap``).

Ticks: a policy with ``tick_interval_s`` gets a :class:`Tick` at 0 and every interval after, while
jobs remain unfinished and a tick can still matter (a job runs, another timed event is ahead, or
the last tick led to a decision) — so a trial whose remaining jobs can never start ends instead of
ticking forever. A :class:`WakeUp` decision gives exactly one Tick at its time.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import BusyInterval, DecisionBook, JobRecord
from raytestbed.core.events import (
    CoflowGrew,
    CoflowStarted,
    Decision,
    Event,
    Fault,
    JobArrived,
    JobFinished,
    JobStarted,
    Preempt,
    Resize,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    Tick,
    WakeUp,
)
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.core.state import ClusterState, RunningJob
from raytestbed.errors import PolicyError, PolicyFault

#: heap priorities at equal time: completions, faults, arrivals, ticks
P_DONE, P_FAULT, P_ARRIVAL, P_TICK = 0, 1, 2, 3

#: fault kinds the event core knows (``Fault.kind``)
FAULT_KINDS = ("kill_server", "slow_nic")


def describe_event(ev: Event) -> str:
    """``JobArrived at t = 12.5 s (job 3)``: an event's kind, time (seconds) and job, for messages."""
    job = getattr(ev, "job_id", None)
    if job is None and getattr(ev, "job", None) is not None:
        job = ev.job.job_id
    if job is None and getattr(ev, "server_id", None) is not None:
        return f"{ev.kind} at t = {ev.time:.6g} s (server {ev.server_id})"
    return f"{ev.kind} at t = {ev.time:.6g} s" + (f" (job {job})" if job is not None else "")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else "(no message)"


def _without_name(e: BaseException, pol: Policy) -> str:
    """An error's first line without a leading ``<policy name>: `` (the fault names the policy itself)."""
    text = _first_line(e)
    return text[len(pol.name) + 2:] if text.startswith(f"{pol.name}: ") else text


def policy_fault(pol: Policy, ev: Event, problem: str, cause: BaseException | None = None) -> PolicyFault:
    """The one-line error for a policy that failed on event ``ev`` (the traceback of ``cause`` kept as text)."""
    import traceback

    detail = "".join(traceback.format_exception(cause)) if cause is not None else ""
    return PolicyFault(f"policy {pol.name!r} failed on {describe_event(ev)}: {problem}", detail)


def _decision_list(decisions: Any, pol: Policy, ev: Event) -> list[Decision]:
    """What ``on_event`` returned, checked: a list (or tuple) of decisions; None counts as no decision."""
    if decisions is None:
        return []
    if not isinstance(decisions, (list, tuple)):
        what = type(decisions).__name__
        hint = " (wrap it: [decision])" if isinstance(decisions, Decision) else ""
        raise policy_fault(pol, ev, f"returned a {what}, not a list of decisions{hint}")
    for i, d in enumerate(decisions):
        if not isinstance(d, Decision):
            raise policy_fault(pol, ev, f"item {i} of the returned list is a {type(d).__name__}, not a decision")
    return list(decisions)


@dataclass
class RunResult:
    """Outcome of one run of a trial on a backend (seconds)."""

    records: list[JobRecord]
    decision_times_s: np.ndarray
    events: int
    end_time_s: float
    busy_gpu_intervals: list[BusyInterval] = field(default_factory=list)  #: (job, start, end, gpus)
    iterations_done: dict[int, float] = field(default_factory=dict)  #: job id -> iterations done at the end
    #: GPU seconds held per GPU type (None: the backend does not keep them)
    type_gpu_seconds: dict[str, float] | None = None
    #: the backend's own ``jobs.csv`` columns (after the common ones) and their values per job id
    job_columns: list[str] = field(default_factory=list)
    job_extra: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: the backend's own result files: file name -> (columns, rows)
    files: dict[str, tuple[list[str], list[dict[str, Any]]]] = field(default_factory=dict)
    #: the backend's own ``summary.json`` entries (they override the common ones of the same key)
    summary: dict[str, Any] = field(default_factory=dict)
    #: False where a re-run of the same trial may differ (the emulator's real compute)
    deterministic: bool = True


class EventCore:
    """Policies, cluster state and timed events of one run (see the module docstring).

    Args:
        cluster: the cluster.
        jobs: the jobs (ids unique); each arrives at its ``arrival_s`` (seconds).
        policies: the placement policy, optionally followed by a network policy.
        faults: faults to inject (``kill_server`` at ``time_s``).
        on_event: called with every event, before the policies see it (the event log).
        on_decisions: called (event, policy name, wall seconds, decisions) for every ``on_event``
            call that returned decisions.
        progress: called (finished jobs, total jobs) whenever a job finishes.
        speeds: per-type speeds policies see (``view.speeds``); None: the cluster's factors, no table.
        restore_s: seconds a job spends restoring its checkpoint whenever it starts again after a
            preemption, a failure or a resize (it holds its GPUs and makes no progress meanwhile);
            the backend charges it (:meth:`restore_until`).
        heap: the list that holds the timed events, ``(time, priority, sequence, item)`` as :mod:`heapq`
            orders them, where the backend's clock keeps them (the emulator's virtual clock: a backend
            that passes one also pushes through its clock, :meth:`push`); None: a list of its own.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policies: Sequence[Policy],
                 faults: Iterable[Fault] = (), on_event: Callable[[Event], None] | None = None,
                 on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None,
                 progress: Callable[[int, int], None] | None = None, speeds=None,
                 restore_s: float = 0.0, heap: list | None = None) -> None:
        if not (restore_s >= 0 and math.isfinite(restore_s)):
            raise ValueError(f"restore_s must be a finite number >= 0, got {restore_s!r}")
        self.cluster = cluster
        self.restore_s = float(restore_s)
        self.jobs = {j.job_id: j for j in jobs}
        if len(self.jobs) != len(jobs):
            raise ValueError("job ids are not unique")
        self.policies = [p for p in policies if p is not None]
        self.state = ClusterState(cluster, speeds=speeds)
        self.state.progress = self.progress_now
        self.view = self.state.view()
        self.records = {j.job_id: JobRecord(j) for j in jobs}
        self.busy: list[BusyInterval] = []  #: closed GPU-holding intervals (job, start s, end s, GPUs)
        self.book = DecisionBook(self.state, self.records, lambda *iv: self.busy.append(iv))
        self.decision_times: list[float] = []  #: wall seconds of every on_event call
        self.events = 0  #: events delivered
        self.unfinished = len(jobs)
        self.done_iters: dict[int, float] = {j.job_id: 0.0 for j in jobs}  #: iterations done per job
        self.known_flow: Callable[[tuple], bool] | None = None  #: flow ids SetFlowRates may name (None: any)
        self._on_event = on_event
        self._on_decisions = on_decisions
        self._progress = progress
        self._heap: list = [] if heap is None else heap
        self._seq = 0
        self._immediate: deque[Event] = deque()
        self._settled: list[Event] = []  #: coflow events of this instant (:meth:`emit_settled`)
        self._tick_led_to_decision = False
        self._starts: dict[int, int] = {}  #: job id -> times started (a restart pays ``restore_s``)
        #: GPU type -> GPU-seconds held by jobs (runs that ended; per-type utilisation in the summary)
        self.type_gpu_seconds: dict[str, float] = {t: 0.0 for t in cluster.gpu_types}
        self._held: dict[int, tuple[float, dict[str, int]]] = {}  #: running job -> (start s, GPUs per type)
        for j in sorted(jobs, key=lambda j: (j.arrival_s, j.job_id)):
            self.push(j.arrival_s, P_ARRIVAL, ("arrival", j.job_id))
        for f in faults:
            if f.kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {f.kind!r} (known: {', '.join(FAULT_KINDS)})")
            if not 0 <= f.target < cluster.num_servers:
                raise ValueError(f"fault {f}: server {f.target} does not exist")
            if f.kind == "slow_nic" and not self.slows_nics:
                raise ValueError(f"fault {f}: this backend cannot slow a NIC (the simulator needs timing mode 'flow')")
            self.push(f.time_s, P_FAULT, (f.kind, f.target, f.factor))
        #: a policy reads current progress at ticks (``Policy.progress_at_ticks``): call :meth:`before_tick`
        self._fresh_progress = any(getattr(p, "progress_at_ticks", False) for p in self.policies)
        self.tick_s = min((p.tick_interval_s for p in self.policies if p.tick_interval_s), default=None)
        if self.tick_s is not None:
            self.push(0.0, P_TICK, ("tick",))

    # ------------------------------------------------------------------ timed events
    def push(self, t: float, prio: int, item: tuple) -> None:
        """Schedule ``item`` (a tuple whose first element names its kind) at time ``t`` (seconds)."""
        self._seq += 1
        heapq.heappush(self._heap, (t, prio, self._seq, item))

    def next_time(self) -> float | None:
        """Time of the next timed event (seconds), or None."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, tuple]:
        """Remove and return the next timed event as (time, item)."""
        t, _, _, item = heapq.heappop(self._heap)
        return t, item

    def handle(self, t: float, item: tuple) -> bool:
        """Handle a timed event of the core's kinds at ``state.now`` (the backend moved its clock to
        ``t``) and dispatch what follows; False for a kind the backend must handle itself."""
        kind = item[0]
        if kind == "arrival":
            job = self.jobs[item[1]]
            self.state.pending[job.job_id] = job
            self.emit(JobArrived(t, job))
        elif kind == "kill_server":
            self.kill_server(item[1])
        elif kind == "slow_nic":
            self.slow_nic(item[1], item[2])
        elif kind == "tick":
            if self._fresh_progress:
                self.before_tick()
            self._tick_led_to_decision = False
            self.emit(Tick(t))
            self.drain()
            if self.unfinished > 0 and (self.state.running or self._tick_led_to_decision
                                        or any(it[3][0] != "tick" for it in self._heap)):
                self.push(t + self.tick_s, P_TICK, ("tick",))
            return True
        elif kind == "wake":
            if self._fresh_progress:
                self.before_tick()
            self.emit(Tick(t))
        else:
            return False
        self.drain()
        return True

    # ------------------------------------------------------------------ dispatch
    def emit(self, event: Event) -> None:
        """Queue ``event`` for the policies (delivered by :meth:`drain`, in order)."""
        self._immediate.append(event)

    #: instants closer than this (seconds) settle together: two backends' float clocks may put one
    #: instant 1e-12 s apart (sums in another order), which must not split a network policy's view
    SETTLE_S = 1e-9

    def emit_settled(self, event: Event) -> None:
        """Queue ``event`` (a ``CoflowStarted`` / ``CoflowGrew`` / ``CoflowFinished``) until the instant it
        happened in has settled (:meth:`deliver_settled`): a network policy then sees every transfer that
        starts or ends at that instant at once, whatever order a backend handles them in. A ``CoflowGrew``
        of a coflow already started or grown in this instant is dropped: that event shows its flows too."""
        if isinstance(event, CoflowGrew) and any(
                isinstance(e, (CoflowStarted, CoflowGrew)) and e.coflow_id == event.coflow_id for e in self._settled):
            return
        self._settled.append(event)

    @property
    def settling(self) -> bool:
        """Whether coflow events of this instant wait for it to settle."""
        return bool(self._settled)

    def deliver_settled(self) -> None:
        """The instant has settled (nothing more happens before time moves on by more than
        :attr:`SETTLE_S`): deliver its coflow events."""
        evs, self._settled = self._settled, []
        self._immediate.extend(evs)
        self.drain()

    def drain(self) -> None:
        """Deliver every queued event to every policy and apply their decisions."""
        queue, view, clock, timed = self._immediate, self.view, time.perf_counter, self.decision_times.append
        while queue:
            ev = queue.popleft()
            self.events += 1
            if self._on_event is not None:
                self._on_event(ev)
            for pol in self.policies:
                t0 = clock()
                try:
                    decisions = pol.on_event(ev, view)
                except PolicyError as e:  # the policy refuses on purpose (e.g. a job pattern it cannot run)
                    raise policy_fault(pol, ev, _without_name(e, pol), e) from e
                except Exception as e:  # the policy's own failure: one line naming it and the event
                    raise policy_fault(pol, ev, f"raised {type(e).__name__}: {_first_line(e)}", e) from e
                dt = clock() - t0
                timed(dt)
                if decisions.__class__ is list and not decisions:
                    continue  # the common answer: nothing to check or apply
                decisions = _decision_list(decisions, pol, ev)
                if decisions:
                    if isinstance(ev, Tick):
                        self._tick_led_to_decision = True
                    if self._on_decisions is not None:
                        self._on_decisions(ev, pol.name, dt, decisions)
                    for d in decisions:
                        try:
                            self.apply(d, pol)
                        except PolicyFault:
                            raise
                        except PolicyError as e:  # a decision the backend cannot apply
                            problem = _without_name(e, pol)
                            kind = type(d).__name__
                            problem = problem if problem.startswith(kind) else f"{kind}: {problem}"
                            raise policy_fault(pol, ev, problem, e) from e
            if isinstance(ev, JobArrived):
                self.book.note_predictions(ev.job.job_id, self.policies)
            self.after_event(ev)

    def apply(self, d: Decision, pol: Policy) -> None:
        """Check decision ``d`` of ``pol`` (:class:`PolicyError` if it cannot be applied) and apply it."""
        job = self.book.check(d, pol.name, known_flow=self.known_flow)
        if isinstance(d, StartJob):
            self.start(job, d.placement)
        elif isinstance(d, Preempt):
            self.stop(d.job_id, "preemptions")
        elif isinstance(d, Resize):
            self.stop(d.job_id)
            self.start(job, d.placement)
        elif isinstance(d, WakeUp):
            self.push(self.book.wake_time(d, self.state.now), P_TICK, ("wake",))
        elif isinstance(d, SetFlowWeights):
            self.set_weights(pol, {int(k): float(v) for k, v in d.weights.items()})
        elif isinstance(d, SetFlowRates):
            self.set_rates(pol, d.rates)

    # ------------------------------------------------------------------ job life cycle
    def start(self, job: Job, placement: Placement) -> None:
        """Book ``job`` on ``placement`` now, tell the backend, announce it."""
        self._starts[job.job_id] = self._starts.get(job.job_id, 0) + 1
        per_type: dict[str, int] = {}
        for g in placement.gpus:
            t = self.cluster.gpu_type_of(g)
            per_type[t] = per_type.get(t, 0) + 1
        self._held[job.job_id] = (self.state.now, per_type)
        self.book.start(job, placement, self.iterations_done(job.job_id))
        self.emit(JobStarted(self.state.now, job.job_id, placement))
        self.run_started(job, placement)

    def restore_until(self, jid: int) -> float:
        """When running job ``jid`` (just started) makes progress again: now, or now + ``restore_s`` if this
        is not its first start (it resumes from a checkpoint), seconds."""
        if self.restore_s > 0 and self._starts.get(jid, 0) > 1:
            return self.state.now + self.restore_s
        return self.state.now

    def stop(self, jid: int, count: str | None = None) -> RunningJob:
        """Take running job ``jid`` off its GPUs, keeping its progress (``count``: ``preemptions`` /
        ``failures`` to add one to); it becomes pending."""
        self.run_stopped(jid)
        self._release_types(jid)
        rj = self.book.stop(jid, count)
        self.after_release()
        return rj

    def finish(self, jid: int) -> None:
        """Running job ``jid`` completed all its iterations now."""
        self.run_finished(jid)
        self._release_types(jid)
        self.book.finish(jid)
        self.unfinished -= 1
        if self._progress is not None:
            self._progress(len(self.jobs) - self.unfinished, len(self.jobs))
        self.after_release()
        self.emit(JobFinished(self.state.now, jid, self.jobs[jid].iterations))

    def _release_types(self, jid: int) -> None:
        start, per_type = self._held.pop(jid, (self.state.now, {}))
        for t, n in per_type.items():
            self.type_gpu_seconds[t] += n * (self.state.now - start)

    def kill_server(self, server: int) -> None:
        """Lose ``server`` for good now: its jobs fail (pending again), the policies hear of it."""
        self.server_lost(server)
        for ev in self.book.kill_server(server, self.stop):
            self.emit(ev)

    # ------------------------------------------------------------------ progress in steps
    def steps_left(self, jid: int) -> float:
        """Steps running job ``jid`` still has to make: (iterations - done) / iterations per step
        (:meth:`~raytestbed.core.job.Job.iterations_per_step`, at its current workers); fractional
        when a job of worker-iterations has fewer left than a step completes (its last step)."""
        job = self.state.running[jid].job
        return (job.iterations - self.done_iters[jid]) / job.iterations_per_step()

    def credit(self, jid: int, start: float, steps: float) -> float:
        """Iterations done by running job ``jid`` that had done ``start`` and made ``steps`` steps
        since, capped at its iterations (a last step of worker-iterations may complete fewer)."""
        job = self.state.running[jid].job
        return min(float(job.iterations), start + steps * job.iterations_per_step())

    def progress_now(self, jid: int) -> float:
        """Iterations ``jid`` has completed by now (``ClusterView.iterations_done``): a running
        job's ``iterations_done``, else the count it stopped at."""
        rj = self.state.running.get(jid)
        return rj.iterations_done if rj is not None else self.done_iters[jid]

    # ------------------------------------------------------------------ backend hooks
    def iterations_done(self, jid: int) -> float:
        """Iterations ``jid`` has done so far (a restarted job resumes from here)."""
        return self.done_iters[jid]

    def run_started(self, job: Job, placement: Placement) -> None:
        """The backend starts running ``job`` (already booked and announced)."""

    def run_stopped(self, jid: int) -> None:
        """The backend stops running ``jid`` (before it is booked off; its progress is kept)."""

    def run_finished(self, jid: int) -> None:
        """``jid`` finished (before it is booked off)."""

    def before_tick(self) -> None:
        """A ``Tick`` is about to reach the policies, one of which set ``progress_at_ticks``: bring what they
        read of running jobs (``RunningJob.iterations_done``) up to now, if the backend keeps it lazily."""

    def after_release(self) -> None:
        """GPUs were released (a job stopped or finished); e.g. re-price contention-dependent jobs."""

    def server_lost(self, server: int) -> None:
        """``server`` is lost (before its jobs are stopped)."""

    #: whether :meth:`slow_nic` is supported (a ``slow_nic`` fault is refused at construction if not)
    slows_nics = False

    def slow_nic(self, server: int, factor: float) -> None:
        """``server``'s NIC runs ``factor`` x slower (egress and ingress) from now on."""
        raise ValueError("this backend cannot slow a NIC")

    def set_weights(self, pol: Policy, weights: dict[int, float]) -> None:
        raise PolicyError(f"{pol.name}: SetFlowWeights is not supported by this backend")

    def set_rates(self, pol: Policy, rates: Mapping[Any, float]) -> None:
        """Apply a network policy's rates: a mapping flow id -> bytes/s (possibly a
        :class:`~raytestbed.core.flows.FlowRates` array, which a backend may apply as one)."""
        raise PolicyError(f"{pol.name}: SetFlowRates is not supported by this backend")

    def after_event(self, event: Event) -> None:
        """Called after every event reached every policy and its decisions were applied."""
