"""The clock service: the loop that drives the virtual clock, the runs on it and (in a trial) the scheduler.

:class:`ClockService` is what the emulated cluster's clock actor runs (:mod:`raytestbed.emu.clock_actor`:
``EmuCluster.clock``); in-process (no Ray) it drives unit tests. It holds

* the :class:`~raytestbed.emu.vclock.VirtualClock` (participants, steps, the fluid fabric);
* the **runs** (:class:`~raytestbed.emu.run.Run`): one per (re)start of a job, launched through a
  *launcher* (the worker pool's host actors, or in-process objects in tests), each followed by a
  :class:`~raytestbed.execution.monitor.RunMonitor`;
* in a trial, the **scheduler** (:class:`~raytestbed.emu.scheduler.EmuScheduler`: the shared event
  core on the virtual clock, the policies' decisions turned into run starts and stops);
* **fast-forward** of steady iterations (:class:`~raytestbed.emu.fastforward.FastForwarder`).

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
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.eventcore import P_DONE
from raytestbed.core.events import Decision, Event, Fault
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.emu.fastforward import FastForward, FastForwarder
from raytestbed.emu.hostlink import remote_call
from raytestbed.emu.run import Run, touches
from raytestbed.emu.scheduler import EmuScheduler
from raytestbed.emu.vclock import Send, VirtualClock, Wake
from raytestbed.execution.monitor import RunMonitor
from raytestbed.execution.plan import plan_job

log = logging.getLogger(__name__)


#: replay: bytes that really move per transfer at most (the fluid model charges the profiled size)
DEFAULT_REPLAY_PAYLOAD = 1 << 20


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
        launcher: starts and drops runs' participants (:class:`~raytestbed.emu.clock_actor.LocalLauncher`,
            or the pool's ``PoolLauncher`` in the actor).
        nic_share: ``"fair"`` or ``"reserved"`` (:mod:`raytestbed.emu.fluid`).
        fast_forward: a :class:`~raytestbed.emu.fastforward.FastForward` (default: on).
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
        self.pace = pace
        self.watchdog_s = float(watchdog_s)
        self.clock = VirtualClock(cluster, nic_share, on_item=self._on_item, on_coflow=self._on_coflow)
        self.runs: dict[tuple, Run] = {}
        self._run_count = 0
        self._launching: list[Run] = []
        self.fast_forward = FastForwarder(fast_forward or FastForward(), self.clock)
        self._activity: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._error: BaseException | None = None
        self.scheduler: EmuScheduler | None = None
        self.out = Batch()  #: what the next poll returns (the scheduler adds to it)
        self._poll_ev: asyncio.Event | None = None
        self.wall_start = time.perf_counter()
        self.stalls: list[str] = []
        self._wakes: dict = {}  # host -> [(pid, Wake | None)] not sent yet
        self.step_messages = 0  #: step_many calls received (one per host and event-loop turn of it)
        self.steps_in = 0  #: steps they carried
        self.wake_messages = 0  #: wake_many calls sent (one per host and clock turn)
        self.wakes_out = 0  #: wake-ups they carried

    # ------------------------------------------------------------------ participants' calls
    async def step_many(self, host, items: Sequence[tuple]) -> int:
        """The steps and leaves of one host's participants, in one message (:mod:`raytestbed.emu.hostlink`):
        ``("step", pid, at, sends, recvs, records)``: participant ``pid`` blocks (:meth:`VirtualClock.step
        <raytestbed.emu.vclock.VirtualClock.step>`), its finished mini-batches' records with it;
        ``("leave", pid, at, records)``: it ended normally (its last records with it). The wake-ups
        (``None`` for a participant whose run was dropped) go back to ``host`` (the launcher's name for it) in
        :meth:`_send_wakes`, one message per host. Returns the items taken."""
        self._ensure_loop()
        self.step_messages += 1
        for it in items:
            if it[0] == "step":
                _, pid, at, sends, recvs, records = it
                self._take_records(pid, records)
                self.steps_in += 1
                self.clock.step(pid, at, sends, recvs, partial(self._post_wake, host, pid))
            else:
                _, pid, at, records = it
                self._take_records(pid, records)
                self.clock.leave(pid)
        self._poke()
        return len(items)

    def _post_wake(self, host, pid, wake: Wake | None) -> None:
        """Queue a wake-up for ``host``; every host's queue goes as one message once this turn is over."""
        box = self._wakes.get(host)
        if box is None:
            box = self._wakes[host] = []
            if len(self._wakes) == 1:
                asyncio.get_running_loop().call_soon(self._send_wakes)
        box.append((pid, wake))

    def _send_wakes(self) -> None:
        boxes, self._wakes = self._wakes, {}
        for host, wakes in boxes.items():
            target = self.launcher.link_of(host) if self.launcher is not None else None
            if target is None:  # its host is gone (a lost server): nobody waits for these
                continue
            self.wake_messages += 1
            self.wakes_out += len(wakes)
            try:
                remote_call(target, "wake_many", wakes)
            except Exception as e:  # a dead host's handle
                log.debug("wake-ups for host %r not sent: %s", host, e)

    # ------------------------------------------------------------------ runs
    def new_run(self, job: Job, placement: Placement, iterations: int, start_iteration: int, mode: str,
                compute_factor: float | None = None, profile=None, device: str = "cpu", speeds=None,
                start_s: float | None = None) -> Run:
        """Plan a run and register its participants (runnable) now; :meth:`_launch_pending` starts them.
        ``speeds``: per-type speeds (each worker computes at its GPU type's factor; None: the cluster's);
        ``start_s``: when its workers start (emulated s; None: now; later: a checkpoint restore first)."""
        self._run_count += 1
        run_id = (job.job_id, self._run_count)
        start_s = self.clock.now if start_s is None else max(self.clock.now, float(start_s))
        plan = plan_job(job, placement, self.cluster, iterations=iterations, mode=mode,
                        start_iteration=start_iteration, profile=profile, speeds=speeds)
        cf = None if compute_factor is None else float(compute_factor)
        cap = self.replay_payload_bytes
        plan = replace(plan, workers=tuple(replace(w, compute_factor=cf, replay_payload_bytes=cap, device=device)
                                          for w in plan.workers),
                       ps=tuple(replace(p, replay_payload_bytes=cap) for p in plan.ps))
        pids = [(run_id, "w", w.rank) for w in plan.workers] + [(run_id, "ps", p.index) for p in plan.ps]
        mon = RunMonitor(job.job_id, len(plan.workers), iterations, start_iteration, start_s)
        run = Run(run_id, job, placement, plan, mon, pids, start_s, links=self._links_of(placement))
        self.links_changed(run.links)
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

    def links_changed(self, links: frozenset | None) -> None:
        """What shares ``links`` changed now (None: everything, e.g. weights): cut the fast-forward windows
        of runs on them short and restart their steadiness."""
        now = self.clock.now
        for run in self.runs.values():
            if not run.ended and (links is None or run.links & links):
                self.fast_forward.cut(run)
                run.changed_s = now

    async def _launch_pending(self) -> None:
        while self._launching:
            run = self._launching.pop(0)
            if run.run_id not in self.runs:
                continue
            try:
                refs = await self.launcher.launch(run, run.start_s)
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
        self.fast_forward.cut(run, stop=True)
        run.ended = True
        run.failure = failure
        self.clock.drop(run_id)
        if run in self._launching:
            self._launching.remove(run)
        if self.launcher is not None:
            self.launcher.drop(run)
        self.links_changed(run.links)
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
        self.links_changed(None)
        self.clock.net.set_weights(dict(weights))

    async def set_rates(self, rates: dict) -> None:
        self.links_changed(None)
        self.clock.net.set_rates(dict(rates))

    async def slow_link(self, link, factor: float) -> None:
        """Divide the capacity of ``link`` (e.g. ``("egress", 3)``, or ``("intra", m)``) by ``factor`` now."""
        self.links_changed(None)
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
                if not run.ended and touches(run, server, self.cluster):
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
                "ff_windows": self.fast_forward.windows_opened, "ff_windows_cut": self.fast_forward.windows_cut,
                "rate_overcommitted": c.net.overcommitted,
                "step_messages": self.step_messages, "steps": self.steps_in,
                "wake_messages": self.wake_messages, "wakes": self.wakes_out,
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
                          mode: str = "replay", compute_factor: float | None = None, device: str = "cpu",
                          speeds=None, restore_s: float = 0.0, profiles=None) -> None:
        """Run ``jobs`` under ``policies`` from now on (the trial's t = 0 is the clock's now); ``speeds``: the
        trial's :class:`~raytestbed.core.gpu_types.GpuSpeeds` (None: the cluster's factors); ``restore_s``:
        seconds a restarted job restores its checkpoint; ``profiles``: real compute, the trial's model
        profiles by name (None: the shipped ones)."""
        if self.clock.now != 0.0 or self.runs:
            raise RuntimeError("a trial needs a fresh clock (one trial per emulated cluster)")
        self.scheduler = EmuScheduler(self, jobs, policies, faults, mode=mode, compute_factor=compute_factor,
                                      device=device, speeds=speeds, restore_s=restore_s, profiles=profiles)
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
        out, self.out = self.out, Batch()
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
            self.fast_forward.end_window(item[1])
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
        self.fast_forward.cut(run, stop=True)
        run.ended = True
        for pid in run.pids:
            self.clock.leave(pid)
        if self.launcher is not None:
            self.launcher.drop(run)
        self.links_changed(run.links)
        run.done_event.set()
        if self.scheduler is not None:
            self.scheduler.run_done(run)

    def _on_coflow(self, kind: str, t: float, job_id: int, coflow, nbytes: float) -> None:
        if self.scheduler is not None:
            self.scheduler.coflow(kind, t, job_id, coflow, nbytes)

    def _fast_forward(self) -> bool:
        """Skip steady iterations of the runs that run now (off while a network policy sets rates);
        returns whether a window opened."""
        if self.scheduler is not None and self.scheduler.network_policy:
            return False
        return self.fast_forward.look([r for r in self.runs.values() if not r.ended and r not in self._launching])

def _what(e: BaseException) -> str:
    """An exception's type and the first line of its message (200 characters at most; it may have none)."""
    first = (str(e).splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


