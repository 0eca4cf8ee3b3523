"""Compiled (numba) passes of the flow simulator over its flow arrays (:mod:`raytestbed.sim.flownet`).

One pass per event instead of a dozen numpy passes: move the flows, end the completed ones, find
the next completion. Each pass visits the rows in ``idx`` (ascending): the rows with a positive
rate, since only they move. Rows are grouped by job rank (all rows of a job are adjacent). Units:
bytes, bytes/s, seconds.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def advance(dt: float, idx: np.ndarray, rem: np.ndarray, rate: np.ndarray, rank: np.ndarray, sent: np.ndarray,
            dirty: np.ndarray, eps: np.ndarray) -> int:  # pragma: no cover - compiled
    """Move every row of ``idx`` by min(rem, rate x dt), adding what it sent to ``sent[rank]``
    (bytes, flow by flow in row order) and flagging the rank in ``dirty``. Returns how many of the
    rows that moved have at most ``eps`` bytes left now."""
    due = 0
    for i in idx:
        x = rate[i] * dt
        if x > 0.0:
            left = rem[i]
            if x > left:
                x = left
            rem[i] = left - x
            r = rank[i]
            sent[r] += x
            dirty[r] = True
            if rem[i] <= eps[i]:
                due += 1
    return due


@numba.njit(cache=True)
def end_done(idx: np.ndarray, rem: np.ndarray, eps: np.ndarray, alive: np.ndarray, rank: np.ndarray,
             sent: np.ndarray, dirty: np.ndarray, rate: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    """End the rows of ``idx`` that are alive with at most ``eps`` bytes left: their bytes left are
    added to ``sent[rank]`` (row order) and the ranks flagged in ``dirty``; each is marked not
    alive with 0 bytes left, rate 0 and no fixed rate (NaN). Returns the ended rows (ascending) and
    how many of them had no fixed rate."""
    n = 0
    for i in idx:
        if alive[i] and rem[i] <= eps[i]:
            n += 1
    out = np.empty(n, np.int64)
    k = 0
    free = 0
    for i in idx:
        if alive[i] and rem[i] <= eps[i]:
            out[k] = i
            k += 1
            sent[rank[i]] += rem[i]
            dirty[rank[i]] = True
            alive[i] = False
            rem[i] = 0.0
            rate[i] = 0.0
            if np.isnan(fixed[i]):
                free += 1
            fixed[i] = np.nan
    return out, free


@numba.njit(cache=True)
def next_completion(idx: np.ndarray, rem: np.ndarray, rate: np.ndarray) -> float:  # pragma: no cover - compiled
    """min over rows of ``idx`` with rate > 0 of rem / rate, seconds (inf if none)."""
    best = np.inf
    for i in idx:
        r = rate[i]
        if r > 0.0:
            t = rem[i] / r
            if t < best:
                best = t
    return best


@numba.njit(cache=True)
def free_alive(alive: np.ndarray, fixed: np.ndarray) -> int:  # pragma: no cover - compiled
    """Rows that are alive without a fixed rate (NaN)."""
    n = 0
    for i in range(alive.size):
        if alive[i] and np.isnan(fixed[i]):
            n += 1
    return n
