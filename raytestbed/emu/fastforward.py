"""Fast-forward: steady iterations of the emulated runs skipped on the virtual clock (docs/emulator.md,
"Fast-forward").

:class:`FastForward` holds the settings (the trial's ``emu.fast_forward``); :class:`FastForwarder`
finds groups of runs (runs sharing links) whose iteration pattern repeats, skips whole periods of it
(a *window*: their transfers pause, their steps and items move on the clock, each run is credited the
iterations it would have done) and cuts a window short when something changes on its links. Units:
emulated seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from raytestbed.core.eventcore import P_DONE
from raytestbed.emu.run import Run
from raytestbed.emu.vclock import VirtualClock


@dataclass(frozen=True)
class FastForward:
    """When steady iterations may be skipped (docs/emulator.md, "Fast-forward").

    Attributes:
        enabled: skip at all.
        window: a lone run with real compute is steady after 2 x ``window`` iterations after the one
            that includes the fill, all begun after the last change on its links; a replay run's pattern
            may repeat with a lag of up to 2 x ``window`` iterations.
        min_iterations: skip only when every run can skip at least this many iterations.
        margin: iterations each run keeps to run for real before its end (plus its pipeline depth).
        period_tolerance: replay runs, and runs that share links, are skipped only by whole periods
            of a pattern that repeats: each run's iteration times repeat (lag of at most 2 x
            ``window``) and the runs' periods fit whole multiples of one common period, both within
            this relative tolerance (runs still drifting, alone or against each other, run for real).
    """

    enabled: bool = True
    window: int = 4
    min_iterations: int = 4
    margin: int = 2
    period_tolerance: float = 1e-6


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


class FastForwarder:
    """The fast-forward windows of one clock (see the module docstring).

    Args:
        ff: the settings.
        clock: the virtual clock whose steps and items a window moves.
    """

    def __init__(self, ff: FastForward, clock: VirtualClock) -> None:
        self.ff = ff
        self.clock = clock
        self._windows: dict[int, Window] = {}  # fast-forward windows in progress
        self._window_of: dict[tuple, int] = {}  # run id -> its window
        self.windows_opened = 0  #: fast-forward windows opened so far
        self._ff_looked: tuple | None = None  #: the runs as fast-forward last found none steady
        self.windows_cut = 0  #: fast-forward windows cut short by a change on their links

    def look(self, runs: list[Run]) -> bool:
        """Open a fast-forward window for every group of ``runs`` (runs sharing links) that is steady;
        returns whether one opened (docs/emulator.md, "Fast-forward"). ``runs``: the runs that run now
        (launched, not ended)."""
        ff = self.ff
        if not ff.enabled:
            return False
        live = [r for r in runs if r.run_id not in self._window_of]
        # the answer changes only when an iteration ends, a run joins or leaves, or its links change
        looked = tuple((r.run_id, len(r.monitor.rows), r.monitor.done, r.changed_s) for r in live)
        if looked == self._ff_looked:
            return False
        opened = False
        for group in _groups(live):
            found = self.period(group)
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
                self.open_window(group, dt, alphas, period)
                opened = True
        self._ff_looked = None if opened else looked
        return opened

    def period(self, group: list[Run]) -> tuple[float, dict] | None:
        """A steady group's period ``P`` (after ``P`` seconds every run is in phase again) and each run's
        mean iteration time over it; None if the group is not steady.

        A run alone with real compute (whose charges vary from pass to pass with the host): steady after
        a count of iterations (:meth:`RunMonitor.settled`), its period one iteration of their mean time;
        with other runs on its links never (their joint pattern never repeats exactly). Replay runs:
        the shortest ``P`` in which each run's iteration pattern repeats a whole number of times
        (:meth:`RunMonitor.period`, within ``period_tolerance``): runs still drifting, alone or
        against each other, are not steady. Whether a group is steady thus never depends on the
        host's load."""
        ff = self.ff
        if any(run.plan.mode != "replay" for run in group):
            if len(group) > 1:
                return None
            run = group[0]
            a = run.monitor.settled(ff.window, run.changed_s)
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

    def open_window(self, group: list[Run], dt: float, alphas: dict, period: float) -> None:
        """Skip ``dt`` seconds of ``group``: its transfers pause, its steps and items move by ``dt``, each
        run is credited ``dt / alpha`` iterations (its workers learn it at their next wake)."""
        now = self.clock.now
        self.windows_opened += 1
        wid = self.windows_opened
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

    def end_window(self, wid: int) -> None:
        """Window ``wid`` reached its end: its transfers resume, its runs run for real again."""
        w = self._windows.pop(wid, None)
        if w is None:
            return
        for run in w.runs:
            self._window_of.pop(run.run_id, None)
            run.monitor._ff_saved = None
        self.clock.unpause(w.paused, w.dt)

    def cut(self, run: Run, stop: bool = False) -> None:
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
            self.end_window(wid)

    def progress(self, run: Run) -> float:
        """Iterations ``run`` has completed by now, fast-forwarded ones counted as they pass."""
        wid = self._window_of.get(run.run_id)
        if wid is None:
            return run.monitor.done
        return run.monitor.ff_done_at(self.clock.now - self._windows[wid].t0)


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
