"""The compiled kernel of the flow simulator's allocator (:func:`raytestbed.network.allocator.grouped_max_min_rates`).

Kept apart so that numba is imported (and the kernel loaded from its cache, or compiled once) only
when the flow simulator allocates.
"""

from __future__ import annotations

import numba
import numpy as np

from raytestbed.network import RTOL


@numba.njit(cache=True)
def _distinct_link(group_links: np.ndarray, g: int, j: int) -> int:  # pragma: no cover - compiled
    """Link ``j`` of group ``g``, or -1 if that slot is empty (< 0) or repeats an earlier slot's link."""
    link = group_links[g, j]
    if link < 0:
        return -1
    for i in range(j):
        if group_links[g, i] == link:
            return -1
    return link


@numba.njit(cache=True)
def link_members(group_links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Link -> groups as CSR (compiled): the groups crossing link l are ``members[ptr[l]:ptr[l+1]]``,
    ascending; a link listed twice by a group counts once. Depends only on ``group_links``, so a
    caller whose groups only ever get added can keep it between allocations."""
    n_g, k = group_links.shape
    cnt = np.zeros(n_links, np.int64)
    for g in range(n_g):
        for j in range(k):
            link = _distinct_link(group_links, g, j)
            if link >= 0:
                cnt[link] += 1
    ptr = np.zeros(n_links + 1, np.int64)
    for l in range(n_links):
        ptr[l + 1] = ptr[l] + cnt[l]
    fill = ptr[:-1].copy()
    members = np.empty(ptr[n_links], np.int64)
    for g in range(n_g):
        for j in range(k):
            link = _distinct_link(group_links, g, j)
            if link >= 0:
                members[fill[link]] = g
                fill[link] += 1
    return ptr, members


@numba.njit(cache=True)
def fill_levels(group_links: np.ndarray, wsum: np.ndarray, capacity: np.ndarray, ptr: np.ndarray,
                members: np.ndarray, level: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Progressive filling one link at a time (compiled): the level (bytes/s per unit weight) at
    which every group freezes. Group g crosses the links ``group_links[g, :]`` (-1 = none, a link
    listed twice counts once) with summed weight ``wsum[g]`` (groups with ``wsum[g] <= 0`` take no
    part: level 0); ``capacity`` (bytes/s) per link; ``ptr``, ``members``: :func:`link_members` of
    ``group_links``. The levels go into ``level[:G]`` (a buffer of at least G entries), returned.

    Each step takes the link with the lowest level lambda_l = R_l / W_l (R_l: capacity left by the
    frozen groups, W_l: weight of the unfrozen groups on l, ties: lowest index), freezes its
    unfrozen groups at lambda_l and takes their rates w_g lambda_l off their other links. A link
    with at most RTOL of its capacity left has level 0. O(L^2 + G K) for L links."""
    n_g, k = group_links.shape
    n_l = capacity.size
    residual = capacity.copy()
    wl = np.zeros(n_l)
    left = np.zeros(n_l, np.int64)
    for g in range(n_g):
        if wsum[g] > 0:
            for j in range(k):
                link = _distinct_link(group_links, g, j)
                if link >= 0:
                    wl[link] += wsum[g]
                    left[link] += 1
    level = level[:n_g]
    level[:] = 0.0
    frozen = np.zeros(n_g, np.bool_)
    while True:
        best = np.inf
        bl = -1
        for l in range(n_l):
            if left[l] > 0:
                r = residual[l]
                lv = 0.0 if r <= RTOL * capacity[l] else r / wl[l]
                if lv < best:
                    best = lv
                    bl = l
        if bl < 0:
            break
        for m in range(ptr[bl], ptr[bl + 1]):
            g = members[m]
            if frozen[g] or not wsum[g] > 0:
                continue
            frozen[g] = True
            level[g] = best
            w = wsum[g]
            for j in range(k):
                link = _distinct_link(group_links, g, j)
                if link < 0:
                    continue
                left[link] -= 1
                if link != bl:
                    residual[link] -= w * best
                    wl[link] -= w
        left[bl] = 0
    return level


@numba.njit(cache=True)
def flow_rates(group: np.ndarray, rank: np.ndarray, rank_weight: np.ndarray, group_links: np.ndarray,
               capacity: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Weighted max-min rates (bytes/s) of flows in groups (compiled): flow f is in group
    ``group[f]`` (< 0: not allocated, rate 0) with weight ``rank_weight[rank[f]]``; the groups'
    summed weights go through :func:`fill_levels`."""
    ptr, members = link_members(group_links, capacity.size)
    out = np.empty(group.size)
    net_rates(group, np.ones(group.size, np.bool_), np.full(group.size, np.nan), rank, rank_weight,
              np.ones(group.size), group_links, capacity, ptr, members, 0.0, np.zeros(group.size), out,
              np.empty(group.size, np.int64), np.empty((2, group_links.shape[0])))
    return out


@numba.njit(cache=True)
def net_rates(group: np.ndarray, alive: np.ndarray, fixed: np.ndarray, rank: np.ndarray, rank_weight: np.ndarray,
              share: np.ndarray, group_links: np.ndarray, capacity: np.ndarray, ptr: np.ndarray, members: np.ndarray,
              intra_bps: float, rem: np.ndarray, out: np.ndarray, moving: np.ndarray,
              scratch: np.ndarray) -> tuple[int, float]:  # pragma: no cover - compiled
    """Rates (bytes/s) of the flow simulator's rows, written into ``out`` (compiled): a row that is
    not ``alive`` gets 0; one with a ``fixed`` rate (not NaN: a network policy's) gets it; the
    others in a group (``group[f]`` >= 0) get weighted max-min rates ``rank_weight[rank[f]] *
    share[f] * level`` of :func:`fill_levels` on ``capacity``, and those in no group (intra-server)
    ``share[f] * intra_bps`` (``share``: the row's part of its connection, 1 for a row that is one).
    ``ptr``, ``members``: :func:`link_members` of ``group_links``. In the same pass
    the rows with a positive rate go (ascending) into ``moving[:n]``; returns n and the seconds
    until the first of them is done, min of ``rem`` (bytes left) / rate (inf if none). ``out`` and
    ``moving`` are buffers of at least ``group.size`` entries and ``scratch`` one of (2, G) for G
    groups that the caller keeps: allocating such arrays afresh at every call costs more in page
    faults than the passes themselves."""
    n_f = group.size
    n_g = group_links.shape[0]
    wsum = scratch[0, :n_g]
    wsum[:] = 0.0
    for f in range(n_f):
        g = group[f]
        if g >= 0 and alive[f] and np.isnan(fixed[f]):
            wsum[g] += rank_weight[rank[f]] * share[f]
    level = fill_levels(group_links, wsum, capacity, ptr, members, scratch[1])
    n = 0
    best = np.inf
    lim = np.inf  # best x (1 + 1e-9): rem < lim x r whenever rem / r < best, whatever the rounding
    for f in range(n_f):
        if not alive[f]:
            out[f] = 0.0
            continue
        if not np.isnan(fixed[f]):
            r = fixed[f]
        else:
            g = group[f]
            r = share[f] * (rank_weight[rank[f]] * level[g] if g >= 0 else intra_bps)
        out[f] = r
        if r > 0.0:
            moving[n] = f
            n += 1
            if rem[f] < lim * r:  # (only then can rem / r be below best: divide)
                t = rem[f] / r
                if t < best:
                    best = t
                    lim = t * (1.0 + 1e-9)
    return n, best


@numba.njit(cache=True)
def greedy_fill(cand: np.ndarray, ptr: np.ndarray, links: np.ndarray, residual: np.ndarray, tol: np.ndarray,
                rates: np.ndarray) -> None:  # pragma: no cover - compiled
    """In ``cand`` order, every flow adds the smallest residual of its links ``links[ptr[f]:ptr[f+1]]``
    (bytes/s) to ``rates[f]`` unless one of them has at most ``tol`` left; updates ``residual``."""
    for f in cand:
        a, b = ptr[f], ptr[f + 1]
        extra = np.inf
        full = False
        for m in range(a, b):
            r = residual[links[m]]
            if r <= tol[links[m]]:
                full = True
                break
            if r < extra:
                extra = r
        if full:
            continue
        rates[f] += extra
        for m in range(a, b):
            residual[links[m]] -= extra


@numba.njit(cache=True)
def coflow_fill(order: np.ndarray, bounds: np.ndarray, cell_link: np.ndarray, cell_load: np.ndarray,
                residual: np.ndarray, factor: np.ndarray) -> None:  # pragma: no cover - compiled
    """Greedy coflow filling (:func:`raytestbed.network.coflow_rates.priority_fill`): coflow c in
    ``order`` gets factor f = min{1, min_l R_l / b_l} over its loaded cells
    ``bounds[c]:bounds[c+1]`` (0 if a link is full) and takes b_l f off each link."""
    for c in order:
        a, b = bounds[c], bounds[c + 1]
        if b <= a:
            continue
        f = 1.0
        for m in range(a, b):
            r = residual[cell_link[m]]
            if r <= 0.0:
                f = 0.0
                break
            q = r / cell_load[m]
            if q < f:
                f = q
        if f > 0.0:
            factor[c] = f
            for m in range(a, b):
                residual[cell_link[m]] -= cell_load[m] * f


@numba.njit(cache=True)
def port_share_fill(order: np.ndarray, cf_start: np.ndarray, src: np.ndarray, dst: np.ndarray, n: int,
                    free: np.ndarray, rates: np.ndarray) -> None:  # pragma: no cover - compiled
    """CoflowSim DARK's per-coflow allocation (compiled): coflows in ``order`` (rows of coflow c:
    ``cf_start[c]:cf_start[c+1]``); on the capacity ``free`` (bytes/s; egress m -> m, ingress m ->
    n + m) left by the coflows before it, each fabric flow gets the smaller of its source's and its
    destination's equal share among this coflow's flows there, min(free_src / k_src, free_dst / k_dst)
    (flows at a full port get 0); then the coflow's rates are taken off the ports."""
    k_out = np.zeros(n, np.int64)
    k_in = np.zeros(n, np.int64)
    for c in order:
        a, b = cf_start[c], cf_start[c + 1]
        for i in range(a, b):
            s, d = src[i], dst[i]
            if s != d and free[n + d] > 0.0 and free[s] > 0.0:
                k_out[s] += 1
                k_in[d] += 1
        for i in range(a, b):
            s, d = src[i], dst[i]
            if s == d or k_out[s] == 0 or k_in[d] == 0 or free[n + d] <= 0.0 or free[s] <= 0.0:
                continue
            r = min(free[s] / k_out[s], free[n + d] / k_in[d])
            rates[i] = r
        for i in range(a, b):
            s, d = src[i], dst[i]
            if s != d:
                k_out[s] = 0
                k_in[d] = 0
        for i in range(a, b):
            s, d = src[i], dst[i]
            if s != d and rates[i] > 0.0:
                free[s] -= rates[i]
                free[n + d] -= rates[i]


@numba.njit(cache=True)
def fixed_load(group: np.ndarray, fixed: np.ndarray, group_links: np.ndarray, n_links: int) -> np.ndarray:  # pragma: no cover - compiled
    """Load (bytes/s) that the rows' ``fixed`` rates (NaN: none) put on every link: row f adds its
    rate to each link of ``group_links[group[f]]`` (rows in no group, ``group[f]`` < 0, cross none);
    summed in row order."""
    used = np.zeros(n_links)
    k = group_links.shape[1]
    for f in range(group.size):
        g = group[f]
        x = fixed[f]
        if g < 0 or np.isnan(x):
            continue
        for j in range(k):
            link = group_links[g, j]
            if link >= 0:
                used[link] += x
    return used
