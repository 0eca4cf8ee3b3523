"""Queueing while GPUs are free: the part of a job's wait that idle capacity could have served.

For each started job, the seconds of its queueing delay (arrival to first start) during which the
cluster as a whole had at least the job's GPU count free, read from the run's busy-GPU intervals
(``gpu_intervals.csv``: job, start_s, end_s, gpus). A policy that starts any job that fits
somewhere, split over servers if need be (A-SRPT's WCS baselines), has none; a strict queue head,
a gate that holds jobs back (A-SRPT's virtual SRPT instance, Alg. 1 L2) or a blocking delay window
shows up here. It counts free GPUs, not where they are: a job that needs one server of a type may
have waited for a reason this does not see. Only the first wait counts (a preempted job's later
waits are not in ``queue_s`` either). Units: seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def free_gpu_steps(intervals: pd.DataFrame, total_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """The cluster's free GPUs as a step function: times (s) and the free count from each time on
    (also the busy-GPU plot of a run's report, :func:`raytestbed.results.report.utilisation_series`).

    At one instant every release counts before every start, and only the count after the last
    change of that instant is kept."""
    t = np.concatenate([intervals["start_s"].to_numpy(float), intervals["end_s"].to_numpy(float)])
    g = intervals["gpus"].to_numpy(float)
    change = np.concatenate([-g, g])
    order = np.lexsort((-change, t))
    t, change = t[order], change[order]
    free = total_gpus + np.cumsum(change)
    last_of_instant = np.append(t[1:] != t[:-1], True)
    return t[last_of_instant], free[last_of_instant]


def queue_gpus_free(jobs: pd.DataFrame, intervals: pd.DataFrame, total_gpus: int) -> np.ndarray:
    """Per job (in ``jobs``' row order): seconds between ``arrival_s`` and ``first_start_s`` during
    which at least ``gpus`` GPUs of ``total_gpus`` were free; 0 for a job that never started."""
    out = np.zeros(len(jobs))
    start = pd.to_numeric(jobs["first_start_s"], errors="coerce").to_numpy(float)
    arrival = jobs["arrival_s"].to_numpy(float)
    need = jobs["gpus"].to_numpy(float)
    started = ~np.isnan(start)
    if not started.any() or intervals.empty:
        return out
    t, free = free_gpu_steps(intervals, total_gpus)
    for g in np.unique(need[started]):
        ok = free >= g
        # seconds with at least g free from the first change t[0] to each later change
        seconds_ok = np.concatenate([[0.0], np.cumsum(np.where(ok[:-1], np.diff(t), 0.0))])
        rows = started & (need == g)
        before_ok = g <= total_gpus  # before t[0] every GPU is free
        out[rows] = (_seconds_ok_until(start[rows], t, ok, seconds_ok, before_ok)
                     - _seconds_ok_until(arrival[rows], t, ok, seconds_ok, before_ok))
    return out


def _seconds_ok_until(x: np.ndarray, t: np.ndarray, ok: np.ndarray, seconds_ok: np.ndarray,
                      before_ok: bool) -> np.ndarray:
    """Seconds from t[0] to each x during which ``ok`` held (a step function changing at ``t``, with
    ``seconds_ok`` its running total at each change); negative before t[0], where ``before_ok`` holds."""
    i = np.searchsorted(t, x, side="right") - 1
    j = np.maximum(i, 0)
    return np.where(i >= 0, seconds_ok[j] + ok[j] * (x - t[j]), before_ok * (x - t[0]))
