"""Each paper's objective, computed for every run's summary (``summary.json``, ``comparison.csv``, report).

* **GADGET** (§IV, eq. (10)): total utility sum_i mu_i(x_i) over the jobs that carry GADGET
  utilities (the ``gadget`` workload: ``zeta``, ``F``, ``lambda1..3`` in ``job.extra``), x_i the
  job's progress in worker-iterations when the run stops (``timing.until_s``, the paper's horizon
  T; without it, at the end of the run), mu_i the sigmoid of the paper's experiments (§VI-1).
* **Parrot** (coflow jobs, flow timing): the coflow completion time (CCT = finish - start of a
  coflow, seconds), average and 95th percentile over all coflows that finished; and the ratio of
  total JCT to the lower bound of Theorem 3 (``ratio_to_lb``, computed in
  :func:`raytestbed.results.records.summarize`).
* **A-SRPT** (total JCT) and **SJF-BCO** (makespan) are summary columns already.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from raytestbed.core.events import CoflowFinished, CoflowStarted, Event
from raytestbed.placement.utility import total_utility as gadget_total

UTILITY_KEYS = ("zeta", "F", "lambda1", "lambda2", "lambda3")


def carries_utility(jobs) -> bool:
    """True when every job has GADGET utility parameters (``job.extra``)."""
    return bool(jobs) and all(all(k in j.extra for k in UTILITY_KEYS) for j in jobs)


def total_utility(jobs, progress: dict[int, float]) -> float:
    """sum_i mu_i(progress_i) with the sigmoid utility (GADGET eq. (10), §VI-1); progress in iterations."""
    return gadget_total(jobs, progress, "sigmoid")


class CoflowClock:
    """Collects coflow completion times from the event stream (feed it every event)."""

    def __init__(self) -> None:
        self._start: dict[tuple[int, tuple], float] = {}
        self.cct_s: list[float] = []

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, CoflowStarted):
            self._start[(ev.job_id, tuple(ev.coflow_id))] = ev.time
        elif isinstance(ev, CoflowFinished):
            t0 = self._start.pop((ev.job_id, tuple(ev.coflow_id)), None)
            if t0 is not None:
                self.cct_s.append(ev.time - t0)

    def summary(self) -> dict[str, Any]:
        """``coflows``, ``avg_cct_s``, ``p95_cct_s`` (empty dict when no coflow finished)."""
        if not self.cct_s:
            return {}
        c = np.asarray(self.cct_s, dtype=float)
        return {"coflows": int(c.size), "avg_cct_s": float(c.mean()), "p95_cct_s": float(np.percentile(c, 95))}


def utility_summary(jobs, iterations_done: dict[int, float] | None, finished_ids: set[int]) -> dict[str, Any]:
    """``total_utility`` for jobs with GADGET utilities (else empty); a finished job counts its whole budget."""
    if not carries_utility(jobs):
        return {}
    progress = dict(iterations_done or {})
    for j in jobs:
        if j.job_id in finished_ids:
            progress[j.job_id] = float(j.iterations)
    u = total_utility(jobs, progress)
    return {"total_utility": u if math.isfinite(u) else math.nan}
