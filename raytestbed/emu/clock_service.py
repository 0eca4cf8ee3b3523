"""The clock service: the virtual clock, the fabric, the runs and (in a trial) the scheduler, in one place.

:class:`ClockService` is what the emulated cluster's clock actor runs (``EmuCluster.clock``;
:func:`clock_actor_class`); in-process (no Ray) it drives unit tests. It owns

* the :class:`~raytestbed.emu.vclock.VirtualClock` (participants, steps, the fluid fabric);
* the **runs**: one per (re)start of a job, launched through a *launcher* (the worker pool's host
  actors, or in-process objects in tests), each followed by a :class:`~raytestbed.execution.monitor.RunMonitor`;
* in a trial, the **scheduler**: an :class:`EmuScheduler`, the shared event core
  (:class:`~raytestbed.core.eventcore.EventCore`) on the virtual clock, which holds the policy
  objects unchanged and turns decisions into run starts and stops, fabric weights and rates;
* **fast-forward** of steady iterations (:class:`FastForward`).

The main loop (:meth:`ClockService._loop`): wait until no participant is runnable, apply the
steps that arrived (:meth:`VirtualClock.admit`), fast-forward if every run is steady, else handle
the next instant (:meth:`VirtualClock.advance`) — transfer completions, steps resuming, completed
iterations, arrivals, ticks, faults — and launch the runs that decisions started. Launching
registers the run's participants as runnable first, so time cannot pass before they block.

What the virtual clock does not model: the wall time of a policy's decision is recorded
(``decision_times``) but not charged to emulated time; Ray latency and host stalls cost wall time
only. docs/emulator.md, "Virtual time".
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.eventcore import P_DONE, EventCore
from raytestbed.core.events import (
    CoflowFinished,
    CoflowStarted,
    Decision,
    Event,
    Fault,
    IterationMeasured,
    JobFailed,
)
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.execution.plan import JobPlan, plan_job
from raytestbed.emu.flowview import FlowView
from raytestbed.errors import PolicyError
from raytestbed.execution.monitor import IterationRow, RunMonitor
from raytestbed.emu.vclock import Send, VirtualClock, Wake

log = logging.getLogger(__name__)


#: replay: bytes that really move per transfer at most (the fluid model charges the profiled size)
DEFAULT_REPLAY_PAYLOAD = 1 << 20


@dataclass(frozen=True)
class FastForward:
    """When steady iterations may be skipped (docs/emulator.md, "Fast-forward").

    Attributes:
        enabled: skip at all.
        window: iterations per window; the mean times of the last two windows (all after the last
            configuration change) must agree.
        tolerance: their largest relative difference.
        min_iterations: skip only when every run can skip at least this many iterations.
        margin: iterations each run keeps to run for real before its end (plus its pipeline depth).
        period_tolerance: replay runs, and runs that share links, are skipped only by whole periods
            of a pattern that repeats: each run's iteration times repeat (lag of at most 2 x
            ``window``) and the runs' periods fit whole multiples of one common period, both within
            this relative tolerance (runs still drifting, alone or against each other, run for real).
    """

    enabled: bool = True
    window: int = 4
    tolerance: float = 0.02
    min_iterations: int = 4
    margin: int = 2
    period_tolerance: float = 1e-6


@dataclass
class Run:
    """One run of a job on the emulated cluster."""

    run_id: tuple
    job: Job
    placement: Placement
    plan: JobPlan
    monitor: RunMonitor
    pids: list
    start_s: float
    links: frozenset = frozenset()  #: NIC (and rack) links its inter-server traffic crosses
    changed_s: float = 0.0  #: last change of what shares its links (fast-forward needs steadiness since)
    failure: str | None = None
    ended: bool = False
    done_event: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Window:
    """A fast-forward window of a group of runs that share links with no one else."""

    runs: list[Run]
    t0: float
    dt: float
    paused: list
    pids: set
    alphas: dict
    period: float  #: seconds after which every run of the group is in phase again (a cut ends on one)


@dataclass
class Batch:
    """What the driver receives from one :meth:`ClockService.poll`."""

    events: list[Event] = field(default_factory=list)
    decisions: list[tuple[Event, str, float, list[Decision]]] = field(default_factory=list)
    records: dict[int, JobRecord] = field(default_factory=dict)  #: records of jobs finished since the last poll
    #: those jobs' measured iteration rows (every run's, in run order) and fast-forwarded iterations
    measured: dict[int, tuple[list, int]] = field(default_factory=dict)
    kills: list[int] = field(default_factory=list)  #: servers the driver must kill (injected faults)
    done: bool = False
    now_s: float = 0.0


class ClockService:
    """The virtual clock and everything on it (module docstring).

    Args:
        cluster: the emulated cluster.
        launcher: starts and drops runs' participants (:class:`LocalLauncher`, or the pool's
            ``PoolLauncher`` in the actor).
        nic_share: ``"fair"`` or ``"reserved"`` (:mod:`raytestbed.emu.fluid`).
        fast_forward: a :class:`FastForward` (default: on).
        pace: emulated seconds per wall second at most (a live demo at human speed); None: as
            fast as the host runs (results are the same either way).
        watchdog_s: wall seconds without progress before the runnable participants are logged.
        replay_payload_bytes: replay: the largest buffer that really moves per transfer (None: the
            profiled size); the fluid model charges the profiled size either way.
    """

    def __init__(self, cluster: Cluster, launcher=None, nic_share: str = "fair",
                 fast_forward: FastForward | None = None, pace: float | None = None,
                 watchdog_s: float = 120.0, replay_payload_bytes: int | None = DEFAULT_REPLAY_PAYLOAD) -> None:
        self.cluster = cluster
        self.replay_payload_bytes = replay_payload_bytes
        self.launcher = launcher
        self.ff = fast_forward or FastForward()
        self.pace = pace
        self.watchdog_s = float(watchdog_s)
        self.clock = VirtualClock(cluster, nic_share, on_item=self._on_item, on_coflow=self._on_coflow)
        self.runs: dict[tuple, Run] = {}
        self._run_count = 0
        self._launching: list[Run] = []
        self._windows: dict[int, Window] = {}  # fast-forward windows in progress
        self._window_of: dict[tuple, int] = {}  # run id -> its window
        self._window_ids = 0
        self._ff_looked: tuple | None = None  #: the runs as fast-forward last found none steady
        self.windows_cut = 0  #: fast-forward windows cut short by a change on their links
        self._activity: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._error: BaseException | None = None
        self.scheduler: EmuScheduler | None = None
        self._out = Batch()
        self._poll_ev: asyncio.Event | None = None
        self.wall_start = time.perf_counter()
        self.stalls: list[str] = []

    # ------------------------------------------------------------------ participants' calls
    async def step(self, pid, at: float, sends: Sequence[Send], recvs: Sequence[Hashable],
                   records: Sequence[tuple] = ()) -> Wake | None:
        """A participant blocks (see :mod:`raytestbed.emu.vclock`); returns its wake-up, or None when
        its run was dropped."""
        self._ensure_loop()
        self._take_records(pid, records)
        fut = asyncio.get_running_loop().create_future()

        def wake(w: Wake | None) -> None:
            if not fut.done():
                fut.set_result(w)

        self.clock.step(pid, at, sends, recvs, wake)
        self._poke()
        return await fut

    async def leave(self, pid, at: float, records: Sequence[tuple] = ()) -> None:
        """A participant ended normally (its last records with it)."""
        self._take_records(pid, records)
        self.clock.leave(pid)
        self._poke()

    # ------------------------------------------------------------------ runs
    def new_run(self, job: Job, placement: Placement, iterations: int, start_iteration: int, mode: str,
                compute_factor: float | None = None, profile=None, device: str = "cpu") -> Run:
        """Plan a run and register its participants (runnable) now; :meth:`_launch_pending` starts them."""
        self._run_count += 1
        run_id = (job.job_id, self._run_count)
        plan = plan_job(job, placement, self.cluster, iterations=iterations, mode=mode,
                        start_iteration=start_iteration, profile=profile)
        from dataclasses import replace

        cf = None if compute_factor is None else float(compute_factor)
        cap = self.replay_payload_bytes
        plan = replace(plan, workers=tuple(replace(w, compute_factor=cf, replay_payload_bytes=cap, device=device)
                                          for w in plan.workers),
                       ps=tuple(replace(p, replay_payload_bytes=cap) for p in plan.ps))
        pids = [(run_id, "w", w.rank) for w in plan.workers] + [(run_id, "ps", p.index) for p in plan.ps]
        mon = RunMonitor(job.job_id, len(plan.workers), iterations, start_iteration, self.clock.now)
        run = Run(run_id, job, placement, plan, mon, pids, self.clock.now, links=self._links_of(placement))
        self._changed(run.links)
        self.runs[run_id] = run
        for pid in pids:
            self.clock.register(pid, run_id)
        self._launching.append(run)
        if iterations <= 0:
            for pid in pids:
                self.clock.leave(pid)
            self._launching.remove(run)
            self.clock.schedule(self.clock.now, P_DONE, ("run", "end", run_id))
        return run

    def _links_of(self, placement: Placement) -> frozenset:
        """The links a run's inter-server traffic can cross (none for a run inside one server)."""
        servers = set(placement.servers(self.cluster)) | set(placement.ps_servers)
        if len(servers) < 2:
            return frozenset()
        return frozenset(link for a in servers for b in servers if a != b for link in self.cluster.path(a, b))

    def _changed(self, links: frozenset | None) -> None:
        """What shares ``links`` changed now (None: everything, e.g. weights): cut the fast-forward windows
        of runs on them short and restart their steadiness."""
        now = self.clock.now
        for run in self.runs.values():
            if not run.ended and (links is None or run.links & links):
                self._cut(run)
                run.changed_s = now

    async def _launch_pending(self) -> None:
        while self._launching:
            run = self._launching.pop(0)
            if run.run_id not in self.runs:
                continue
            try:
                refs = await self.launcher.launch(run, self.clock.now)
            except Exception as e:  # could not start (a model real mode cannot build, a lost host)
                self._run_failed(run.run_id, f"start failed: {_what(e)}")
                continue
            asyncio.get_running_loop().create_task(self._watch(run.run_id, refs))

    async def _watch(self, run_id, refs) -> None:
        try:
            await asyncio.gather(*refs)
        except BaseException as e:  # a worker raised (or its task was cancelled by a drop)
            run = self.runs.get(run_id)
            if run is not None and not run.ended:
                self._run_failed(run_id, f"worker failed: {_what(e)}")
                self._poke()

    def drop_run(self, run_id, failure: str | None = None) -> int:
        """Stop a run now (preemption, failure): its participants and transfers go; returns iterations done."""
        run = self.runs.get(run_id)
        if run is None:
            return 0
        self._cut(run, stop=True)
        run.ended = True
        run.failure = failure
        self.clock.drop(run_id)
        if run in self._launching:
            self._launching.remove(run)
        if self.launcher is not None:
            self.launcher.drop(run)
        self._changed(run.links)
        run.done_event.set()
        return run.monitor.done

    def _run_failed(self, run_id, reason: str) -> None:
        run = self.runs.get(run_id)
        if run is None or run.ended:
            return
        if self.scheduler is not None and run.job.job_id in self.scheduler.run_of \
                and self.scheduler.run_of[run.job.job_id] == run_id:
            self.scheduler.job_failed(run.job.job_id, reason)
        else:
            self.drop_run(run_id, reason)

    def _take_records(self, pid, records) -> None:
        if not records:
            return
        run = self.runs.get(self.clock.group_of(pid) or (pid[0] if isinstance(pid, tuple) else None))
        if run is None or run.ended:
            return
        for t_end, recs in (x for r in records for x in run.monitor.add(r)):
            self.clock.schedule(t_end, P_DONE, ("run", "iter", run.run_id, recs))

    # ------------------------------------------------------------------ manual use (tests, benchmarks)
    async def start_run(self, job: Job, placement: Placement, iterations: int, mode: str = "replay",
                        start_iteration: int = 0, compute_factor: float | None = None, profile=None,
                        device: str = "cpu") -> tuple:
        """Start a run now outside a trial; returns its id (see :meth:`wait_run`)."""
        self._ensure_loop()
        run = self.new_run(job, placement, iterations, start_iteration, mode, compute_factor, profile, device)
        self._poke()
        return run.run_id

    async def wait_run(self, run_id, timeout_s: float | None = None) -> dict:
        """Wait until the run ended; returns ``{"iterations_done", "failure", "rows", "end_s"}``."""
        run = self.runs[run_id]
        await asyncio.wait_for(run.done_event.wait(), timeout_s)
        if self._error is not None:
            raise self._error
        return self.run_info(run_id)

    def run_info(self, run_id) -> dict:
        run = self.runs[run_id]
        return {"iterations_done": run.monitor.done, "failure": run.failure, "ended": run.ended,
                "rows": [r.as_tuple() for r in run.monitor.rows], "skipped": run.monitor.skipped,
                "end_s": run.monitor.last_end}

    async def stop_run(self, run_id) -> int:
        """Preempt a manual run now; returns the iterations it completed."""
        return self.drop_run(run_id)

    async def set_weights(self, weights: dict) -> None:
        self._changed(None)
        self.clock.net.set_weights(dict(weights))

    async def set_rates(self, rates: dict) -> None:
        self._changed(None)
        self.clock.net.set_rates(dict(rates))

    async def slow_link(self, link, factor: float) -> None:
        """Divide the capacity of ``link`` (e.g. ``("egress", 3)``, or ``("intra", m)``) by ``factor`` now."""
        self._changed(None)
        if isinstance(link, tuple) and link and link[0] == "intra":
            self.clock.net.set_intra_factor(int(link[1]), factor)
        else:
            self.clock.net.set_link_factor(link, factor)

    async def server_lost(self, server: int) -> None:
        """Server ``server`` died (killed by hand, or found dead): its runs fail now."""
        if self.scheduler is not None:
            self.scheduler.lose_server(server)
        else:
            for run in list(self.runs.values()):
                if not run.ended and _touches(run, server, self.cluster):
                    self.drop_run(run.run_id, f"server {server} lost")
        self._poke()

    async def now(self) -> float:
        return self.clock.now

    async def stats(self) -> dict:
        c = self.clock
        return {"now_s": c.now, "bytes_sent": dict(c.bytes_sent), "transfers_done": c.transfers_done,
                "in_flight": len(c.net), "late_steps": c.late_steps, "rounds": c.rounds,
                "participants": c.participants, "runnable": len(c.runnable),
                "skipped_iterations": sum(r.monitor.skipped for r in self.runs.values()),
                "ff_windows": self._window_ids, "ff_windows_cut": self.windows_cut,
                "rate_overcommitted": c.net.overcommitted,
                "stalls": list(self.stalls)}

    async def flows(self) -> list[dict]:
        """Connections in flight: key, job, servers, transfers, bytes left, rate (bytes/s)."""
        net = self.clock.net
        rates = net.conn_rates()
        out = []
        for c in net.conns.values():
            xs = list(c.members.values())
            out.append({"key": c.key, "job_id": c.job_id, "src_server": xs[0].src_server,
                        "dst_server": xs[0].dst_server, "transfers": len(xs),
                        "bytes_left": sum(x.remaining for x in xs), "rate_bps": rates[c.key]})
        return out

    async def ping(self) -> bool:
        return True

    # ------------------------------------------------------------------ trial
    async def begin_trial(self, jobs: Sequence[Job], policies: Sequence[Policy], faults: Sequence[Fault] = (),
                          mode: str = "replay", compute_factor: float | None = None, device: str = "cpu") -> None:
        """Run ``jobs`` under ``policies`` from now on (the trial's t = 0 is the clock's now)."""
        if self.clock.now != 0.0 or self.runs:
            raise RuntimeError("a trial needs a fresh clock (one trial per emulated cluster)")
        self.scheduler = EmuScheduler(self, jobs, policies, faults, mode=mode, compute_factor=compute_factor,
                                      device=device)
        self._poll_ev = asyncio.Event()
        self.wall_start = time.perf_counter()  # pace: the trial's t = 0
        self._ensure_loop()
        self._poke()

    async def poll(self, timeout_s: float = 1.0) -> Batch:
        """Wait (up to ``timeout_s`` wall) for news; return what happened since the last poll."""
        if self._error is None and self._poll_ev is not None:
            try:
                await asyncio.wait_for(self._poll_ev.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
            self._poll_ev.clear()
        if self._error is not None:
            raise self._error
        out, self._out = self._out, Batch()
        out.done = self._trial_done()
        out.now_s = self.clock.now
        return out

    async def result(self) -> dict[str, Any]:
        """The trial's books: records, decision times, events, end time, busy intervals, measured rows."""
        s = self.scheduler
        measured: dict[int, list] = {}
        skipped: dict[int, int] = {}
        for jid in sorted({run.job.job_id for run in self.runs.values()}):
            measured[jid], skipped[jid] = self.job_measured(jid)
        return {"records": s.records, "decision_times": np.asarray(s.decision_times, dtype=float),
                "events": s.events, "end_time_s": s.state.now, "busy": list(s.busy), "measured": measured,
                "skipped": skipped, "stats": await self.stats(), "warnings": list(s.warnings),
                "iterations_done": dict(s.done_iters)}

    def job_measured(self, jid: int) -> tuple[list, int]:
        """Job ``jid``'s measured iteration rows over all its runs (in run order) and its fast-forwarded iterations."""
        runs = sorted((r for r in self.runs.values() if r.job.job_id == jid), key=lambda r: r.run_id[1])
        return [row.as_tuple() for r in runs for row in r.monitor.rows], sum(r.monitor.skipped for r in runs)

    def _trial_done(self) -> bool:
        s = self.scheduler
        if s is None:
            return False
        if s.unfinished == 0:
            return True
        return self._stuck()

    def _stuck(self) -> bool:
        """Nothing can happen any more: no participant, nothing scheduled, nothing launching."""
        return (self.clock.quiet() and not self._launching and self.clock.participants == 0
                and not math.isfinite(self.clock.next_time()))

    # ------------------------------------------------------------------ the loop
    def _ensure_loop(self) -> None:
        if self._loop_task is None:
            self._activity = asyncio.Event()
            self._loop_task = asyncio.get_running_loop().create_task(self._loop())

    def _poke(self) -> None:
        if self._activity is not None:
            self._activity.set()

    def _news(self) -> None:
        if self._poll_ev is not None:
            self._poll_ev.set()

    async def _loop(self) -> None:
        try:
            while True:
                await self._launch_pending()
                await self._until_quiet()
                if self._launching:
                    continue
                woke = self.clock.admit()
                if woke or not self.clock.quiet() or self._launching:
                    continue
                if (self.scheduler is not None and self.scheduler.settling
                        and self.clock.next_time() > self.clock.now + self.scheduler.SETTLE_S):
                    self.scheduler.settled()  # this instant has settled: its coflow events go to the policies
                    continue
                if self.scheduler is not None and self._trial_done():
                    self._news()
                    await self._idle()
                    continue
                if self._fast_forward():
                    continue
                t = self.clock.next_time()
                if not math.isfinite(t):
                    await self._idle()
                    continue
                if self.pace:
                    wait = self.wall_start + t / self.pace - time.perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                self.clock.advance()
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # a policy error or a bug: surface it to every caller
            log.exception("clock loop failed")
            self._error = e
            for run in self.runs.values():
                run.done_event.set()
            self._news()

    async def _idle(self) -> None:
        """Nothing to do until someone calls in (a new run, a step)."""
        self._activity.clear()
        await self._activity.wait()

    async def _until_quiet(self) -> None:
        waited = 0.0
        while not self.clock.quiet() and not self._launching:
            self._activity.clear()
            t0 = time.perf_counter()
            try:
                await asyncio.wait_for(self._activity.wait(), self.watchdog_s)
            except asyncio.TimeoutError:
                waited += time.perf_counter() - t0
                msg = (f"virtual clock held at {self.clock.now:.6g} s for {waited:.0f} s wall by "
                       f"{len(self.clock.runnable)} runnable participant(s): {sorted(map(repr, self.clock.runnable))[:6]}")
                log.warning(msg)
                self.stalls.append(msg)

    # ------------------------------------------------------------------ clock callbacks
    def _on_item(self, t: float, item: tuple) -> None:
        if item[0] == "ffend":
            self._end_window(item[1])
            return
        if item[0] == "run":
            kind, run_id = item[1], item[2]
            run = self.runs.get(run_id)
            if run is None or run.ended:
                return
            if kind == "iter":
                row = run.monitor.complete(t, item[3])
                if self.scheduler is not None:
                    self.scheduler.iteration(run, row)
            if run.monitor.finished:
                self._run_done(run)
            return
        if self.scheduler is not None:
            self.scheduler.timed(t, item)
            self._news()

    def _run_done(self, run: Run) -> None:
        self._cut(run, stop=True)
        run.ended = True
        for pid in run.pids:
            self.clock.leave(pid)
        if self.launcher is not None:
            self.launcher.drop(run)
        self._changed(run.links)
        run.done_event.set()
        if self.scheduler is not None:
            self.scheduler.run_done(run)

    def _on_coflow(self, kind: str, t: float, job_id: int, coflow, nbytes: float) -> None:
        if self.scheduler is not None:
            self.scheduler.coflow(kind, t, job_id, coflow, nbytes)

    # ------------------------------------------------------------------ fast-forward
    def _fast_forward(self) -> bool:
        """Open a fast-forward window for every group of runs (runs sharing links) that is steady;
        returns whether one opened (docs/emulator.md, "Fast-forward")."""
        ff = self.ff
        if not ff.enabled or (self.scheduler is not None and self.scheduler.network_policy):
            return False
        live = [r for r in self.runs.values() if not r.ended and r.run_id not in self._window_of
                and r not in self._launching]
        # the answer changes only when an iteration ends, a run joins or leaves, or its links change
        looked = tuple((r.run_id, len(r.monitor.rows), r.monitor.done, r.changed_s) for r in live)
        if looked == self._ff_looked:
            return False
        opened = False
        for group in _groups(live):
            found = self._period(group)
            if found is None:
                continue
            period, alphas = found
            # a window also ends before the next periodic tick: a slotted policy may stop a run there,
            # and a run stopped inside a window cannot lose its unfinished iteration as a run that ran does
            t_tick = self.clock.next_item_time(lambda it: it[0] == "tick") - self.clock.now
            dt = min((min(run.monitor.iterations - run.monitor.done, t_tick / alphas[run.run_id])
                      - ff.margin - run.plan.workers[0].num_stages - 1) * alphas[run.run_id] for run in group)
            dt = math.floor(dt / period + 1e-9) * period  # whole periods: the runs resume in phase
            if dt >= ff.min_iterations * max(alphas.values()):
                self._open_window(group, dt, alphas, period)
                opened = True
        self._ff_looked = None if opened else looked
        return opened

    def _period(self, group: list[Run]) -> tuple[float, dict] | None:
        """A steady group's period ``P`` (after ``P`` seconds every run is in phase again) and each run's
        mean iteration time over it; None if the group is not steady.

        A run alone with real compute (whose charges vary from pass to pass): steady within
        ``tolerance`` (:meth:`RunMonitor.steady`), its period one iteration of its mean time. Otherwise
        the shortest ``P`` in which each run's iteration pattern repeats a whole number of times
        (:meth:`RunMonitor.period`, within ``period_tolerance``): runs still drifting, alone or
        against each other, are not steady."""
        ff = self.ff
        if len(group) == 1 and group[0].plan.mode != "replay":
            run = group[0]
            a = run.monitor.steady(ff.window, ff.tolerance, run.changed_s)
            return None if a is None else (a, {run.run_id: a})
        periods = {}
        for run in group:
            p = run.monitor.period(run.changed_s, ff.period_tolerance, 2 * ff.window, 2 * ff.window)
            if p is None:
                return None
            periods[run.run_id] = p
        longest = max(s for _, s in periods.values())
        for m in range(1, 2 * ff.window + 1):
            P = m * longest
            alphas = {}
            for rid, (n, s) in periods.items():
                k = round(P / s)
                if abs(k * s - P) > ff.period_tolerance * P:
                    break
                alphas[rid] = P / (k * n)
            else:
                return P, alphas
        return None

    def _open_window(self, group: list[Run], dt: float, alphas: dict, period: float) -> None:
        """Skip ``dt`` seconds of ``group``: its transfers pause, its steps and items move by ``dt``, each
        run is credited ``dt / alpha`` iterations (its workers learn it at their next wake)."""
        now = self.clock.now
        self._window_ids += 1
        wid = self._window_ids
        pids = {pid for run in group for pid in run.pids}
        ids = {run.run_id for run in group}
        paused = self.clock.pause(pids)
        self.clock.shift_items(lambda it: _owned(it, pids, ids), dt)
        for run in group:
            n = run.monitor.ff_begin(dt, alphas[run.run_id])
            for pid in run.pids:
                self.clock.set_skip(pid, n)
            self._window_of[run.run_id] = wid
        self._windows[wid] = Window(group, now, dt, paused, pids, alphas, period)
        self.clock.schedule(now + dt, P_DONE, ("ffend", wid))

    def _end_window(self, wid: int) -> None:
        """Window ``wid`` reached its end: its transfers resume, its runs run for real again."""
        w = self._windows.pop(wid, None)
        if w is None:
            return
        for run in w.runs:
            self._window_of.pop(run.run_id, None)
            run.monitor._ff_saved = None
        self.clock.unpause(w.paused, w.dt)

    def _cut(self, run: Run, stop: bool = False) -> None:
        """``run`` is in a fast-forward window and something changes on its links now: end the window
        early, at its next whole period (at or after now), so its runs resume in phase. ``stop``: the
        run itself stops now (its window closes now)."""
        wid = self._window_of.get(run.run_id)
        if wid is None:
            return
        w = self._windows[wid]
        now = self.clock.now
        end = now
        if not stop:
            end = min(w.t0 + w.dt, w.t0 + math.ceil((now - w.t0) / w.period - 1e-9) * w.period)
        if end >= w.t0 + w.dt:
            return  # it ends by itself then
        self.windows_cut += 1
        back = w.t0 + w.dt - end
        ids = {r.run_id for r in w.runs}
        self.clock.shift_items(lambda it: _owned(it, w.pids, ids) or it == ("ffend", wid), -back)
        for r in w.runs:
            if not r.ended:
                # the stopping run keeps only the iterations it completed; the others resume in phase
                n = r.monitor.ff_revise(end - w.t0, whole=stop and r is run)
                for pid in r.pids:
                    self.clock.set_skip(pid, n)
        w.dt -= back
        if end <= now:
            self._end_window(wid)

    def ff_progress(self, run: Run) -> float:
        """Iterations ``run`` has completed by now, fast-forwarded ones counted as they pass."""
        wid = self._window_of.get(run.run_id)
        if wid is None:
            return run.monitor.done
        return run.monitor.ff_done_at(self.clock.now - self._windows[wid].t0)


def _what(e: BaseException) -> str:
    """An exception's type and the first line of its message (200 characters at most; it may have none)."""
    first = (str(e).splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _owned(item: tuple, pids: set, run_ids: set) -> bool:
    """Whether a scheduled item belongs to these participants or runs (moved with a fast-forward window)."""
    if item[0] == "resume":
        return item[1] in pids
    return item[0] == "run" and item[2] in run_ids


def _groups(runs: list[Run]) -> list[list[Run]]:
    """Runs grouped by shared links (connected components); a run inside one server is its own group."""
    groups: list[tuple[set, list[Run]]] = []
    for run in runs:
        links, members = set(run.links), [run]
        for g in [g for g in groups if g[0] & run.links]:
            groups.remove(g)
            links |= g[0]
            members = g[1] + members
        groups.append((links, members))
    return [m for _, m in groups]


def _touches(run: Run, server: int, cluster: Cluster) -> bool:
    return server in run.placement.servers(cluster) or server in run.placement.ps_servers


class EmuScheduler(EventCore):
    """The event core on the virtual clock: the policies decide, runs start and stop.

    Timed events (arrivals, ticks, wake-ups, faults) live in the clock's heap; completed
    iterations become ``IterationMeasured`` (the measured iteration time), the last one
    ``JobFinished``; coflows of the fabric become ``CoflowStarted`` / ``CoflowFinished``.
    A decision is applied at once at the clock's time: ``StartJob`` registers and launches a
    run, ``Preempt`` drops it (the job keeps its completed iterations), ``SetFlowWeights`` /
    ``SetFlowRates`` change the fabric's allocation now.
    """

    def __init__(self, service: ClockService, jobs: Sequence[Job], policies: Sequence[Policy],
                 faults: Sequence[Fault] = (), mode: str = "replay", compute_factor: float | None = None,
                 window: int = 10, device: str = "cpu") -> None:
        self.service = service
        self.mode = mode
        self.compute_factor = compute_factor
        self.device = device
        self.window = window
        self.run_of: dict[int, tuple] = {}
        self.warnings: list[str] = []
        self._estimates: dict[int, list[float]] = {}
        super().__init__(service.cluster, jobs, policies, faults,
                         on_event=lambda ev: service._out.events.append(ev),
                         on_decisions=lambda ev, name, dt, ds: service._out.decisions.append((ev, name, dt, list(ds))))
        self._heap = service.clock._heap
        self.network_policy = any(p.role == "network" for p in self.policies)
        # what network policies read: the fluid model's transfers laid out as the flow simulator's table
        self.flowview = FlowView(service.clock.net, jobs, service.clock.fabric_bytes)
        self.state.flow_arrays = self._flow_arrays
        self.state.coflow_sync = self._sync_coflows
        self.known_flow = self.flowview.knows

    # ------------------------------------------------------------------ timed events on the clock
    def push(self, t: float, prio: int, item: tuple) -> None:
        self.service.clock.schedule(t, prio, item)

    def timed(self, t: float, item: tuple) -> None:
        self.state.now = t
        self._sync_bytes()
        self.handle(t, item)

    # ------------------------------------------------------------------ reports from runs
    def iteration(self, run: Run, row: IterationRow) -> None:
        jid = run.job.job_id
        if self.run_of.get(jid) != run.run_id:
            return
        self.state.now = row.end_s
        self._sync_bytes()
        rj = self.state.running[jid]
        self.done_iters[jid] = self.credit(jid, run.monitor.start_iteration, run.monitor.done)
        rj.iterations_done = self.done_iters[jid]
        est = self._estimates.setdefault(jid, [])
        est.append(row.iter_s)
        tail = est[1:] if len(est) > 1 else est  # the run's first iteration includes pipeline fill
        rj.iteration_time_s = self.records[jid].iteration_time_s = float(np.mean(tail[-self.window:]))
        self.emit(IterationMeasured(row.end_s, jid, row.iter_s, compute_s=row.compute_s, comm_s=row.comm_s))
        self.drain()

    def run_done(self, run: Run) -> None:
        jid = run.job.job_id
        if self.run_of.get(jid) != run.run_id:
            return
        self.state.now = self.service.clock.now
        self.finish(jid)
        self.service._out.records[jid] = self.records[jid]
        self.service._out.measured[jid] = self.service.job_measured(jid)
        self.drain()

    def job_failed(self, jid: int, reason: str) -> None:
        """A worker of ``jid``'s run died (or its launch failed): the job is pending again."""
        self.state.now = self.service.clock.now
        self._sync_bytes()
        self.stop(jid, "failures")
        self.emit(JobFailed(self.state.now, jid, reason))
        self.warnings.append(f"job {jid}: {reason}")
        self.drain()

    def lose_server(self, server: int) -> None:
        """A server died outside the trial's injected faults (found dead by the driver)."""
        if server in self.state.lost_servers:
            return
        self.state.now = self.service.clock.now
        self.kill_server(server)
        self.drain()

    def coflow(self, kind: str, t: float, jid: int, coflow, nbytes: float) -> None:
        """A coflow of a running job started or finished now (the fabric saw its first transfer start or its
        last one in flight end): counted now, reported to the policies when the instant has settled."""
        rj = self.state.running.get(jid)
        if rj is None:
            return
        cid = coflow if isinstance(coflow, tuple) else (coflow,)
        if kind == "started":
            self.emit_settled(CoflowStarted(t, jid, cid, nbytes))
        else:
            rj.coflows_done += 1
            self.emit_settled(CoflowFinished(t, jid, cid, nbytes))

    def settled(self) -> None:
        """Nothing more happens at the clock's now: deliver the instant's coflow events."""
        self.state.now = self.service.clock.now
        self._sync_bytes()
        self.deliver_settled()

    def _sync_bytes(self) -> None:
        """Refresh what the policies read of running jobs: bytes sent in the current run (as the flow
        simulator counts them: what the job's transfers through the fabric moved so far,
        :meth:`FlowView.sent`), iterations done (fast-forwarded iterations counted as their time passes)."""
        sent = self.flowview.sent
        for jid, rj in self.state.running.items():
            rj.bytes_sent = sent(jid)
            run = self.service.runs.get(self.run_of.get(jid))
            if run is not None:
                rj.iterations_done = self.credit(jid, run.monitor.start_iteration, self.service.ff_progress(run))

    # ------------------------------------------------------------------ event-core hooks
    def run_started(self, job: Job, placement: Placement) -> None:
        done = int(self.done_iters[job.job_id])
        profile = None
        if self.mode == "real":
            from raytestbed.core.profile import default_profiles

            profile = default_profiles().get(job.model)
        steps = math.ceil(self.steps_left(job.job_id) - 1e-9)
        run = self.service.new_run(job, placement, steps, done, self.mode, self.compute_factor, profile, self.device)
        self.run_of[job.job_id] = run.run_id
        self._estimates[job.job_id] = []
        self.flowview.run_started(job.job_id)

    def run_stopped(self, jid: int) -> None:
        rid = self.run_of.pop(jid, None)
        if rid is not None:
            run = self.service.runs[rid]
            self.service.drop_run(rid)  # first: a fast-forward window is cut at now
            self.done_iters[jid] = self.credit(jid, run.monitor.start_iteration, run.monitor.done)

    def run_finished(self, jid: int) -> None:
        self.run_of.pop(jid, None)
        self.done_iters[jid] = float(self.jobs[jid].iterations)

    def server_lost(self, server: int) -> None:
        self.service._out.kills.append(server)

    slows_nics = True

    def slow_nic(self, server: int, factor: float) -> None:
        self.service._changed(frozenset({("egress", server), ("ingress", server)}))
        for side in ("egress", "ingress"):
            self.service.clock.net.set_link_factor((side, server), factor)

    def set_weights(self, pol: Policy, weights: dict[int, float]) -> None:
        self.service._changed(None)
        self.service.clock.net.set_weights(weights)

    def set_rates(self, pol: Policy, rates: dict) -> None:
        self.service._changed(None)
        try:
            self.flowview.apply(rates)
        except PolicyError as e:
            raise PolicyError(f"{pol.name}: {e}") from None

    def _flow_arrays(self):
        """``view.flows()``: the transfers in flight as the flow simulator's table, bytes left as of now."""
        self._sync_bytes()
        return self.flowview.flows({j: rj.bytes_sent for j, rj in self.state.running.items()})

    def _sync_coflows(self) -> None:
        """``view.coflows``: the same flows as coflow records."""
        self.state.coflows.clear()
        self.state.coflows.update(self.flowview.coflow_infos(self.state.now))


class LocalLauncher:
    """Runs' participants as in-process objects (tests; no Ray): the clock service is their clock."""

    def __init__(self, service_ref: Callable[[], ClockService] | None = None) -> None:
        self._service = service_ref
        self.objects: dict[tuple, list] = {}
        self.tasks: dict[tuple, list] = {}

    async def launch(self, run: Run, start_s: float) -> list:
        from raytestbed.emu.executors.worker import ParamServer, StageWorker

        clock = self._service()
        workers = [StageWorker(spec, clock, (run.run_id, "w", spec.rank), start_s) for spec in run.plan.workers]
        ps = [ParamServer(p, clock, (run.run_id, "ps", p.index), start_s, run.monitor.iterations)
              for p in run.plan.ps]
        peers = {spec.gpu: w for spec, w in zip(run.plan.workers, workers)}
        for w in workers:
            w.connect(peers, ps)
        for p in ps:
            p.connect(peers)
        self.objects[run.run_id] = workers + ps
        tasks = [asyncio.ensure_future(o.run()) for o in workers + ps]
        self.tasks[run.run_id] = tasks
        return tasks

    def drop(self, run: Run) -> None:
        for t in self.tasks.pop(run.run_id, []):
            if not t.done():
                t.cancel()
        self.objects.pop(run.run_id, None)


def local_service(cluster: Cluster, **kw) -> ClockService:
    """A :class:`ClockService` whose runs are in-process objects (no Ray)."""
    holder: list[ClockService] = []
    svc = ClockService(cluster, launcher=LocalLauncher(lambda: holder[0]), **kw)
    holder.append(svc)
    return svc


class ClockActor(ClockService):
    """:class:`ClockService` as an async Ray actor whose runs live in the worker pool's hosts.

    Create with :func:`clock_actor_class` (``EmuCluster`` does): ``gpu_hosts`` / ``server_hosts``
    map every emulated GPU / server to its host actor."""

    def __init__(self, cluster: Cluster, gpu_hosts: dict, server_hosts: dict, nic_share: str = "fair",
                 fast_forward: FastForward | None = None, pace: float | None = None,
                 watchdog_s: float = 120.0, replay_payload_bytes: int | None = DEFAULT_REPLAY_PAYLOAD) -> None:
        import ray

        from raytestbed.emu.pool import PoolLauncher

        me = ray.get_runtime_context().current_actor
        super().__init__(cluster, PoolLauncher(gpu_hosts, server_hosts, me), nic_share=nic_share,
                         fast_forward=fast_forward, pace=pace, watchdog_s=watchdog_s,
                         replay_payload_bytes=replay_payload_bytes)

    async def lose_server(self, server: int) -> None:
        """``server`` was killed (or died): never launch there again; its runs fail now."""
        self.launcher.lose_server(server, self.cluster.gpus_of(server))
        await self.server_lost(server)

    async def pid(self) -> int:
        import os

        return os.getpid()


def clock_actor_class():
    """:class:`ClockActor` as a Ray actor class (imports Ray on first use)."""
    import ray

    return ray.remote(num_cpus=0)(ClockActor)
