"""Fast-forward in the flow simulator: steady iterations of worker-by-worker runs skipped exactly.

A pipeline or PS job run worker by worker (:mod:`raytestbed.sim.pipeline_workers`) makes tens of
events per iteration. Once its iterations repeat, the simulator skips whole periods of them, as the
emulator's fast-forward does (:mod:`raytestbed.emu.fastforward`), but only where the result is the
one the skipped events would have given (up to the rounding of sums in another order):

* **A group.** The runs whose transfers may share a link, directly or through others (running
  jobs of two or more servers with a server in common), are looked at together, at the iteration
  ends of the one with the lowest job id; every one must run worker by worker. Flows of a group
  share nothing with anyone else's, and nobody else's share depends on them.
* **Steady.** At each of those instants the group's state is recorded relative to it
  (:class:`Mark`): the iteration's time, compute and communication, each participant's time and
  what it waits for, the transfers in flight (bytes left, shares, start times). The group is steady
  with period ``n`` iterations when each of its last ``max(n, min_rows)`` marks equals the one
  ``n`` before within ``tolerance`` (relative) and every run completed the same number of
  iterations in the last two periods: the state it comes back to after ``P`` seconds (the ``n``
  iterations' time) is the state it left.
* **Nothing changes meanwhile.** A window ends before the next instant at which anything could
  change on its links: the next arrival, tick, policy wake-up or fault, and the earliest time any
  other running job could finish (a lower bound: a worker run's remaining compute at its profile,
  a coflow run's remaining cycles of compute and stand-alone coflow time), since a finish lets the
  policy place a job. It leaves each run ``margin`` iterations plus its pipeline depth to run for
  real before its end.

A window of ``m`` periods (``dt = m x P`` seconds; each run's iterations of a period times ``m``)
takes the group's flows out of the network (:meth:`~raytestbed.sim.flownet.FlowNet.detach`),
moves every time its runs hold and their pending events ``dt`` later, lowers its workers' iteration limit by the skipped
iterations and credits them at once (with their lower bound, coflows and bytes, as the events would
have); at its end the flows come back as they were and the runs go on. Not made for skipped
iterations: their ``IterationMeasured``, ``CoflowStarted`` / ``CoflowFinished`` events.

Off with a network policy (it may set rates at any coflow event) and with ``timing.fast_forward:
false``. Units: seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mark:
    """The state of a group of worker-by-worker runs at the end of an iteration of its first run
    (``t``, seconds), relative to that instant: ``shape`` what must be equal, ``vals`` what must agree
    within the tolerance (seconds and bytes); per run, what it did so far: ``coflows`` finished,
    ``bytes_done`` moved, ``iterations`` completed."""

    t: float
    shape: tuple
    vals: tuple[float, ...]
    coflows: tuple[int, ...]
    bytes_done: tuple[float, ...]
    iterations: tuple[int, ...]


def agree(a: Mark, b: Mark, tol: float) -> bool:
    """Whether marks ``a`` and ``b`` describe the same state (``tol``: relative, of each value)."""
    if a.shape != b.shape or len(a.vals) != len(b.vals):
        return False
    return all(abs(x - y) <= tol * max(abs(x), abs(y)) + 1e-12 for x, y in zip(a.vals, b.vals))


def find_period(marks: list[Mark], tol: float, max_lag: int, min_rows: int) -> int | None:
    """The smallest lag ``n`` (1..``max_lag`` iterations) at which each of the last ``max(n, min_rows)``
    marks agrees with the one ``n`` before, with equal iteration times within ``tol``; None if none."""
    for n in range(1, max_lag + 1):
        h = max(n, min_rows)
        if len(marks) < h + n + 1:
            return None
        ok = True
        for k in range(len(marks) - h, len(marks)):
            a, b = marks[k], marks[k - n]
            da, db = a.t - marks[k - 1].t, b.t - marks[k - n - 1].t
            if abs(da - db) > tol * max(da, db) or not agree(a, b, tol):
                ok = False
                break
        if ok:
            return n
    return None


@dataclass
class FastForward:
    """Fast-forward's settings and books (module docstring).

    Attributes:
        tolerance: relative agreement of two marks (seconds and bytes).
        max_lag: the longest period looked for, iterations.
        min_rows: marks that must repeat (at least one period's).
        min_iterations: a window skips at least this many iterations.
        margin: iterations each run keeps to run for real before its end (plus its pipeline depth).
    """

    tolerance: float = 1e-9
    max_lag: int = 8
    min_rows: int = 8
    min_iterations: int = 4
    margin: int = 2
    marks: dict[tuple, list[Mark]] = field(default_factory=dict)  #: group (job ids) -> its recent marks
    windows: int = 0  #: windows opened
    skipped: int = 0  #: iterations skipped (of the runs' schedules)

    def add(self, key: tuple, mark: Mark) -> tuple[int, float] | None:
        """Record group ``key``'s mark; returns ``(n, P)`` (period in its first run's iterations and in
        seconds) if it is steady. Marks of groups that no longer exist go."""
        ms = self.marks.setdefault(key, [])
        for other in [k for k in self.marks if k != key and set(k) & set(key)]:
            del self.marks[other]
        ms.append(mark)
        keep = 2 * self.max_lag + self.min_rows + 2
        if len(ms) > 2 * keep:
            del ms[:-keep]
        n = find_period(ms, self.tolerance, self.max_lag, self.min_rows)
        if n is None:
            return None
        return n, ms[-1].t - ms[-1 - n].t

    def periods(self, key: tuple, n: int) -> list[tuple[int, float, int]] | None:
        """Per run of group ``key``: coflows finished, bytes moved and iterations completed in the last
        ``n`` marks (one period); None unless every run completed the same positive number of
        iterations in the period before."""
        ms = self.marks[key]
        if len(ms) < 2 * n + 1:
            return None
        a, b, c = ms[-1], ms[-1 - n], ms[-1 - 2 * n]
        out = []
        for i in range(len(a.iterations)):
            iters = a.iterations[i] - b.iterations[i]
            if iters < 1 or b.iterations[i] - c.iterations[i] != iters:
                return None
            out.append((a.coflows[i] - b.coflows[i], a.bytes_done[i] - b.bytes_done[i], iters))
        return out

    def shift(self, key: tuple, dt: float) -> None:
        """Group ``key``'s runs moved ``dt`` seconds later: so do its marks (it stays steady)."""
        ms = self.marks.get(key)
        if ms:
            self.marks[key] = [Mark(m.t + dt, m.shape, m.vals, m.coflows, m.bytes_done, m.iterations) for m in ms]

    def whole_periods(self, span: float, period: float) -> int:
        """Whole periods that end strictly before ``span`` seconds."""
        if not period > 0:
            return 0
        if math.isinf(span):
            return 1 << 40
        return max(0, math.ceil(span / period * (1 - 1e-12)) - 1)
