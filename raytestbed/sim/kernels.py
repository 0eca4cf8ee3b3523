"""Compiled (numba) passes of the flow simulator over its flow arrays (:mod:`raytestbed.sim.flownet`).

One pass per event instead of a dozen numpy passes: move every flow, find the completed ones, find
the next completion. Rows are grouped by job rank (all rows of a job are adjacent). Units: bytes,
bytes/s, seconds.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def advance(dt: float, rem: np.ndarray, rate: np.ndarray, rank: np.ndarray, sent: np.ndarray,
            dirty: np.ndarray) -> None:  # pragma: no cover - compiled
    """Move every row by min(rem, rate x dt), adding what it sent to ``sent[rank]`` (bytes, flow by
    flow in row order) and flagging the rank in ``dirty``."""
    for i in range(rem.size):
        x = rate[i] * dt
        if x > 0.0:
            left = rem[i]
            if x > left:
                x = left
            rem[i] = left - x
            r = rank[i]
            sent[r] += x
            dirty[r] = True


@numba.njit(cache=True)
def done_rows(rem: np.ndarray, eps: np.ndarray, alive: np.ndarray, rank: np.ndarray, sent: np.ndarray,
              dirty: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Rows that are alive with at most ``eps`` bytes left, ascending; their bytes left are added to
    ``sent[rank]`` (row order) and the ranks flagged in ``dirty``."""
    n = 0
    for i in range(rem.size):
        if alive[i] and rem[i] <= eps[i]:
            n += 1
    out = np.empty(n, np.int64)
    k = 0
    for i in range(rem.size):
        if alive[i] and rem[i] <= eps[i]:
            out[k] = i
            k += 1
            sent[rank[i]] += rem[i]
            dirty[rank[i]] = True
    return out


@numba.njit(cache=True)
def next_completion(rem: np.ndarray, rate: np.ndarray) -> float:  # pragma: no cover - compiled
    """min over rows with rate > 0 of rem / rate, seconds (inf if none)."""
    best = np.inf
    for i in range(rem.size):
        r = rate[i]
        if r > 0.0:
            t = rem[i] / r
            if t < best:
                best = t
    return best
