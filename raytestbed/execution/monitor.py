"""Per-run iteration records: the workers' per-mini-batch records become whole iterations.

Each worker of a run hands the clock one record per mini-batch ``(j, rank, t_end, compute_s,
comm_s, loss, samples, cpu_s, profiled_s)`` (:mod:`raytestbed.execution.driver`). :class:`RunMonitor`
collects them; when every worker has reported mini-batch ``j`` the iteration is complete: it
ended when the last worker ended it (``t_end``, emulated seconds), its time is the gap to the
previous iteration's end (the first counts from the run's start, pipeline fill included), its
compute and communication times are the largest of any worker, its loss the sample-weighted mean
of the last stage's replicas (real compute), its charge ratio the workers' charged compute over
their profiled compute (1 in replay).

It also says when a run is **steady** (fast-forward may skip its iterations). With replay compute:
its iteration times repeat exactly (:meth:`RunMonitor.period`). With real compute, whose charges
vary from pass to pass with the host, a lone run is steady (:meth:`RunMonitor.settled`) once it has
run the iterations a replay run needs at the least — ``2 x window`` after the one that includes the
fill, all begun after the last change of its links — whatever their times: a count, so the same
iterations are skipped on a quiet and on a busy host, and only the rate they are skipped at (the
measured mean of those iterations) depends on the host. Real compute's charge rule follows the
profile from a run's first pass on (raytestbed/emu/executors/compute.py), so that mean is the
profile's rate up to the charges' pass-to-pass jitter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class IterationRow:
    """One completed iteration of a run (emulated seconds)."""

    job_id: int
    iteration: int
    end_s: float
    iter_s: float
    compute_s: float
    comm_s: float
    loss: float | None
    cpu_s: float
    charge_ratio: float = 1.0

    def as_tuple(self) -> tuple:
        """``(t, iteration, iter_s, compute_s, comm_s, loss, cpu_s, charge_ratio)``, what ``iterations.csv`` holds."""
        return (self.end_s, self.iteration, self.iter_s, self.compute_s, self.comm_s, self.loss, self.cpu_s,
                self.charge_ratio)


def _charge_ratio(recs: list[tuple]) -> float:
    """Charged over profiled compute seconds of one iteration's worker records (1 if none profiled)."""
    prof = sum(r[8] for r in recs)
    return sum(r[3] for r in recs) / prof if prof > 0 else 1.0


@dataclass
class RunMonitor:
    """Iterations of one run of a job (module docstring).

    Args:
        job_id: the job.
        ranks: workers reporting each mini-batch.
        iterations: iterations this run performs.
        start_iteration: the job's iteration count when the run started.
        start_s: when the run started (emulated s).
    """

    job_id: int
    ranks: int
    iterations: int
    start_iteration: int
    start_s: float
    done: int = 0  #: iterations completed (run for real or fast-forwarded)
    skipped: int = 0  #: of which fast-forwarded
    credit: float = 0.0  #: iterations credited by fast-forward beyond the whole ones skipped (-0.5..0.5)
    last_end: float = field(default=math.nan)
    rows: list[IterationRow] = field(default_factory=list)
    _pending: dict = field(default_factory=dict)
    _ff_saved: tuple | None = None
    _next: int = 0

    def __post_init__(self) -> None:
        self.last_end = self.start_s

    def add(self, rec: tuple) -> list[tuple]:
        """Take one worker record; returns the iterations it completed as ``(t_end, records)``, in order."""
        j, rank = int(rec[0]), int(rec[1])
        self._pending.setdefault(j, {})[rank] = rec
        out = []
        while len(self._pending.get(self._next, ())) == self.ranks:
            recs = list(self._pending.pop(self._next).values())
            out.append((max(r[2] for r in recs), recs))
            self._next += 1
        return out

    def complete(self, t_end: float, recs: list[tuple]) -> IterationRow:
        """Iteration done at ``t_end`` (the clock's time now): count it and return its row."""
        losses = [(r[5], r[6]) for r in recs if r[5] is not None]
        row = IterationRow(
            job_id=self.job_id, iteration=self.start_iteration + self.done, end_s=t_end,
            iter_s=t_end - self.last_end, compute_s=max(r[3] for r in recs), comm_s=max(r[4] for r in recs),
            loss=(sum(l * n for l, n in losses) / max(1, sum(n for _, n in losses))) if losses else None,
            cpu_s=max(r[7] for r in recs), charge_ratio=_charge_ratio(recs))
        self.last_end = t_end
        self.done += 1
        self.rows.append(row)
        return row

    def shift(self, dt: float) -> None:
        """Every time held moves ``dt`` seconds later (the simulator's fast-forward)."""
        self.last_end += dt
        self._pending = {j: {k: (r[0], r[1], r[2] + dt, *r[3:]) for k, r in recs.items()}
                         for j, recs in self._pending.items()}

    @property
    def finished(self) -> bool:
        return self.done >= self.iterations

    def settled(self, window: int, since_s: float) -> float | None:
        """Real compute: the mean time of the last ``2 x window`` iterations once they and the one
        before them all began after ``since_s`` (emulated s; the run's first iteration, which includes
        the fill, never counts), else None. Decided on the count alone (module docstring)."""
        n = 2 * window
        if window < 1 or len(self.rows) < n + 1:
            return None
        last = self.rows[-n:]
        before = self.rows[-n - 1]
        if before.end_s - before.iter_s < since_s - 1e-12:
            return None
        mean = sum(r.iter_s for r in last) / n
        return mean if mean > 0 else None

    def period(self, since_s: float, tolerance: float, min_rows: int, max_lag: int) -> tuple[int, float] | None:
        """The run's iteration times repeat: the smallest lag ``n`` (1..``max_lag`` iterations) with
        ``|t_k - t_(k-n)| <= tolerance x t_k`` for each of the last ``max(n, min_rows)`` iterations,
        all of them and the ``n`` before begun after ``since_s`` (emulated s; the run's first
        iteration, which includes fill, never counts). Returns ``(n, seconds those n iterations took)``
        or None."""
        rows = self.rows
        for n in range(1, max_lag + 1):
            h = max(n, min_rows)
            if len(rows) < h + n + 1:
                return None
            first = rows[-(h + n)]
            if first.end_s - first.iter_s < since_s - 1e-12:
                return None
            if all(abs(rows[k].iter_s - rows[k - n].iter_s) <= tolerance * rows[k].iter_s
                   for k in range(len(rows) - h, len(rows))):
                return n, rows[-1].end_s - rows[-1 - n].end_s
        return None

    def ff_begin(self, dt: float, alpha: float) -> int:
        """Start a fast-forward window of ``dt`` seconds at ``alpha`` s per iteration (revisable until it
        ends: :meth:`ff_revise`); returns the whole iterations skipped."""
        self._ff_saved = (self.done, self.skipped, self.credit, self.last_end, alpha)
        return self.fast_forward(dt, alpha)

    def ff_revise(self, dt: float, whole: bool = False) -> int:
        """The window lasted ``dt`` seconds only (cut short): credit that instead; returns the iterations.
        ``whole``: the run stops now, so only the iterations completed by then count (rounded down, as
        :meth:`ff_done_at`; an unfinished iteration is lost, as in a run that ran)."""
        self.done, self.skipped, self.credit, self.last_end, alpha = self._ff_saved
        if not whole:
            return self.fast_forward(dt, alpha)
        n = int(math.floor(self.credit + dt / alpha + 1e-9))
        self.credit, self.done, self.skipped, self.last_end = 0.0, self.done + n, self.skipped + n, self.last_end + dt
        return n

    def ff_done_at(self, elapsed: float) -> float:
        """Iterations completed ``elapsed`` seconds into the current window (for the policies' view)."""
        done, _, credit, _, alpha = self._ff_saved
        return done + max(0.0, min(self.done - done, math.floor(credit + elapsed / alpha + 1e-9)))

    def fast_forward(self, dt: float, alpha: float) -> int:
        """``dt`` emulated seconds were skipped at ``alpha`` s per iteration: credit them; returns
        whole iterations skipped now, rounded to the nearest (the rest, positive or negative, is
        carried to the next fast-forward, so a run is off by at most half an iteration)."""
        self.credit += dt / alpha
        n = int(math.floor(self.credit + 0.5))
        self.credit -= n
        self.done += n
        self.skipped += n
        self.last_end += dt
        return n
