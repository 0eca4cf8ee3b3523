"""Compiled (numba) passes of the flow simulator over its flow arrays (:mod:`raytestbed.sim.flownet`).

One pass per event instead of a dozen numpy passes: bring the flows to a time from their anchors
(and note those at their threshold), anchor the rows whose rate changed, end the completed ones.
Each row's bytes are :func:`~raytestbed.core.flows.bytes_left` of its anchor, compiled here from
the one definition the emulator's fluid model uses too. The passes visit the rows in ``idx``
(ascending): the rows with a positive rate, since only they move. Rows are grouped by job rank
(all rows of a job are adjacent). Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import numba
import numpy as np

from raytestbed.core.flows import bytes_left, finish_time


_left = numba.njit(cache=True)(bytes_left)
_finish = numba.njit(cache=True)(finish_time)


@numba.njit(cache=True)
def advance(t: float, idx: np.ndarray, rem: np.ndarray, rem0: np.ndarray, t0: np.ndarray, rate: np.ndarray,
            rank: np.ndarray, dirty: np.ndarray, eps: np.ndarray, eps_max: float) -> np.ndarray:  # pragma: no cover - compiled
    """Bring every row of ``idx`` to time ``t`` (s): ``rem`` = :func:`~raytestbed.core.flows.bytes_left`
    of its anchor (``rem0`` bytes at ``t0`` s, ``rate`` bytes/s since), flagging in ``dirty`` the
    ranks whose bytes moved. Returns the rows of ``idx`` at a positive rate (so alive) with at most
    ``eps`` bytes left now, ascending (``eps_max`` >= every ``eps``: ``eps`` is read only for rows
    that close to their end)."""
    due = np.empty(idx.size, np.int64)  # (untouched beyond the first n: no page faults)
    n = 0
    k = -1
    for j in range(idx.size):
        i = idx[j]
        r = rate[i]
        if not r > 0.0:
            continue
        left = _left(rem0[i], r, t0[i], t)
        if left != rem[i]:
            rem[i] = left
            if rank[i] != k:
                k = rank[i]
                dirty[k] = True
        if left <= eps_max:
            if left <= eps[i]:
                due[n] = i
                n += 1
    return due[:n]


@numba.njit(cache=True)
def reanchor(now: float, rem: np.ndarray, rem0: np.ndarray, t0: np.ndarray, arate: np.ndarray,
             rate: np.ndarray, fin: np.ndarray) -> None:  # pragma: no cover - compiled
    """Anchor every row whose ``rate`` (bytes/s) differs from its anchor's ``arate`` at ``now`` (s):
    its bytes left now, its new rate and its :func:`~raytestbed.core.flows.finish_time`."""
    for i in range(rate.size):
        if rate[i] != arate[i]:
            rem0[i] = rem[i]
            t0[i] = now
            arate[i] = rate[i]
            fin[i] = _finish(rem[i], rate[i], now)


@numba.njit(cache=True)
def next_finish(idx: np.ndarray, now: float, rem: np.ndarray, rate: np.ndarray, arate: np.ndarray,
                fin: np.ndarray) -> float:  # pragma: no cover - compiled
    """Earliest finish time (s) of the rows of ``idx`` at a positive rate: their anchor's ``fin``, or
    for a row whose ``rate`` differs from its anchor's ``arate``, as if anchored at ``now`` (inf if none)."""
    best = np.inf
    for i in idx:
        r = rate[i]
        if not r > 0.0:
            continue
        f = fin[i] if r == arate[i] else _finish(rem[i], r, now)
        if f < best:
            best = f
    return best


@numba.njit(cache=True)
def ends_now(idx: np.ndarray, now: float, rem: np.ndarray, rate: np.ndarray, arate: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether a row of ``idx`` whose ``rate`` differs from its anchor's ``arate`` finishes at ``now`` (s)
    anchored there (its bytes left take less than the clock's resolution at that rate)."""
    for i in idx:
        r = rate[i]
        if r > 0.0 and r != arate[i] and _finish(rem[i], r, now) <= now:
            return True
    return False


@numba.njit(cache=True)
def end_done(idx: np.ndarray, rem: np.ndarray, eps: np.ndarray, alive: np.ndarray, rank: np.ndarray,
             dirty: np.ndarray, rate: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    """End the rows of ``idx`` that are alive with at most ``eps`` bytes left: their ranks are
    flagged in ``dirty`` (their bytes sent changed); each is marked not
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
            dirty[rank[i]] = True
            alive[i] = False
            rem[i] = 0.0
            rate[i] = 0.0
            if np.isnan(fixed[i]):
                free += 1
            fixed[i] = np.nan
    return out, free


@numba.njit(cache=True)
def end_done_books(idx: np.ndarray, rem: np.ndarray, eps: np.ndarray, alive: np.ndarray, rank: np.ndarray,
                   uid: np.ndarray, total: np.ndarray, dirty: np.ndarray, rate: np.ndarray,
                   fixed: np.ndarray, done: np.ndarray, live: np.ndarray):  # pragma: no cover - compiled
    """:func:`end_done` with its books: each ended row's size is added to ``done[rank]`` (row order) and
    its rank's ``live`` count drops by one. Returns the ended rows (ascending), their ranks and keys
    (``uid``), how many had no fixed rate, and the ranks (in row order) left without a live row."""
    rows, free = end_done(idx, rem, eps, alive, rank, dirty, rate, fixed)
    n = rows.size
    ranks = np.empty(n, np.int64)
    keys = np.empty(n, np.int64)
    emptied = np.empty(n, np.int64)
    m = 0
    for k in range(n):
        i = rows[k]
        r = rank[i]
        ranks[k] = r
        keys[k] = uid[i]
        done[r] += total[i]
        live[r] -= 1
        if k + 1 == n or rank[rows[k + 1]] != r:  # (the rank's last ended row: rows of a rank are adjacent)
            if live[r] == 0:
                emptied[m] = r
                m += 1
    return rows, ranks, keys, free, emptied[:m]


@numba.njit(cache=True)
def sent_segments(dirty: np.ndarray, rank: np.ndarray, alive: np.ndarray, total: np.ndarray,
                  rem: np.ndarray):  # pragma: no cover - compiled
    """The ranks flagged in ``dirty`` (ascending; the flags are cleared) and, for those with rows
    (``rank`` is non-decreasing), what each of their rows moved: ``total - rem`` if ``alive`` else 0,
    the rows of each rank one segment of ``vals`` from ``starts[k]`` (bytes). Returns (ranks, whether
    each has rows, vals, starts); ``np.add.reduceat(vals, starts)`` sums each segment as numpy sums a
    rank's block of rows."""
    ranks = np.flatnonzero(dirty)
    has = np.zeros(ranks.size, np.bool_)
    lo = np.searchsorted(rank, ranks, side="left")
    hi = np.searchsorted(rank, ranks, side="right")
    n = 0
    for k in range(ranks.size):
        dirty[ranks[k]] = False
        n += hi[k] - lo[k]
    vals = np.empty(n, np.float64)
    starts = np.empty(ranks.size, np.int64)
    m = 0
    j = 0
    for k in range(ranks.size):
        if hi[k] > lo[k]:
            has[k] = True
            starts[m] = j
            m += 1
            for i in range(lo[k], hi[k]):
                vals[j] = total[i] - rem[i] if alive[i] else 0.0
                j += 1
    return ranks, has, vals, starts[:m]


@numba.njit(cache=True)
def splice_rows(ints: np.ndarray, floats: np.ndarray, alive: np.ndarray, r: int, after: bool, new_ints: np.ndarray,
                new_floats: np.ndarray):  # pragma: no cover - compiled
    """The table without its ended rows (not ``alive``) and with the new rows inserted where job rank
    ``r``'s rows end (``after``) or begin: before the first kept row whose rank (``ints[1]``,
    non-decreasing) is above ``r`` (at least ``r``). Blocks: one row per column, one column per table row.
    Returns the new ``(ints, floats, alive)``."""
    n = alive.size
    m = new_ints.shape[1]
    k = 0
    for i in range(n):
        if alive[i]:
            k += 1
    out_i = np.empty((ints.shape[0], k + m), np.int64)
    out_f = np.empty((floats.shape[0], k + m), np.float64)
    out_a = np.ones(k + m, np.bool_)
    rank = ints[1]
    j = 0
    placed = False
    for i in range(n + 1):
        if not placed and (i == n or (alive[i] and (rank[i] > r if after else rank[i] >= r))):
            for q in range(m):
                for c in range(ints.shape[0]):
                    out_i[c, j] = new_ints[c, q]
                for c in range(floats.shape[0]):
                    out_f[c, j] = new_floats[c, q]
                j += 1
            placed = True
        if i == n:
            break
        if alive[i]:
            for c in range(ints.shape[0]):
                out_i[c, j] = ints[c, i]
            for c in range(floats.shape[0]):
                out_f[c, j] = floats[c, i]
            j += 1
    return out_i, out_f, out_a


@numba.njit(cache=True)
def free_alive(alive: np.ndarray, fixed: np.ndarray) -> int:  # pragma: no cover - compiled
    """Rows that are alive without a fixed rate (NaN)."""
    n = 0
    for i in range(alive.size):
        if alive[i] and np.isnan(fixed[i]):
            n += 1
    return n
