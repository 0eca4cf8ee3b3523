"""Per-flow rates for the active coflows of several jobs, computed on arrays.

Building blocks of the coflow network policies (``parrot``, ``aalo``, ``lccf``).
Rates are bytes/s, volumes bytes, times seconds.

* :class:`~raytestbed.core.flows.Flows` (from ``view.flows()``): the active coflows as
  arrays (flow ids, coflow index, src/dst server, remaining and total bytes, link
  incidences); :class:`~raytestbed.core.flows.LinkIndex` numbers the links.
* :func:`coflow_gamma`, :func:`coflow_o3_rates`: every coflow's stand-alone optimum O3 on its
  remaining bytes, Gamma~ (eq. 26) and b = V / Gamma~ (eq. 27): the closed form of
  :mod:`raytestbed.core.o3` on the table's arrays; :func:`o3_scaled_rates`
  times a per-coflow share (Parrot Alg. 1 S7-9: W_l / sum W).
* :func:`global_factor`: Alg. 1 S10, the largest common factor phi that keeps
  every link within capacity, phi = min_{l: L_l > 0} C_l / L_l.
* :func:`fill_residual`: an extension of S10 (not the paper's rule): the
  capacity left after the common factor is shared by weighted max-min (the core
  allocator's progressive filling) among flows whose links all have spare
  capacity, so afterwards every flow crosses a saturated link.
* :func:`priority_fill`: greedy coflow-level filling in priority order (impl.): each coflow gets its O3 rates times min{1, min_l R_l / b_l}.

Links are the cluster's: every server's NIC egress and ingress, plus rack
up/down links for inter-rack flows when racks exist. Flows inside one server
cross no link and run at the intra-server rate ``intra_bps``.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.flows import Flows, LinkIndex
from raytestbed.core.o3 import o3_gamma, o3_rates
from raytestbed.network.allocator import max_min_rates

#: relative slack below which a link counts as saturated
SATURATED_RTOL = 1e-9
def coflow_gamma(flows: Flows, links: LinkIndex, nbytes: np.ndarray | None = None) -> np.ndarray:
    """Gamma~ (eq. 26, :func:`raytestbed.core.o3.o3_gamma`) of every coflow of the table on its remaining
    bytes, seconds; 0 if it has no fabric flow. ``nbytes``: per-flow bytes to use instead of the remaining
    ones (e.g. ``flows.total``)."""
    return o3_gamma(flows.src, flows.dst, flows.remaining if nbytes is None else nbytes, links.egress,
                    links.ingress, flows.cf, flows.n_coflows)


def coflow_o3_rates(flows: Flows, links: LinkIndex) -> np.ndarray:
    """b^(O3) = V / Gamma~ (eq. 27, :func:`raytestbed.core.o3.o3_rates`) of every flow of the table on its
    remaining bytes, bytes/s; intra-server flows get intra_bps."""
    return o3_rates(flows.src, flows.dst, flows.remaining, links.egress, links.ingress, flows.cf,
                    flows.n_coflows, links.intra_bps)


def o3_scaled_rates(flows: Flows, links: LinkIndex, share: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
    """b^(O3) (eq. 27) of every flow times its coflow's ``share`` (Alg. 1 S8), bytes/s; intra-server
    flows keep intra_bps. ``base``: the O3 rates if already computed (:func:`coflow_o3_rates`)."""
    rates = coflow_o3_rates(flows, links) if base is None else base.copy()
    net = flows.src != flows.dst
    rates[net] *= share[flows.cf[net]]
    return rates


def link_loads(flows: Flows, links: LinkIndex, rates: np.ndarray) -> np.ndarray:
    """Total rate on every link, bytes/s."""
    return np.bincount(flows.inc_link, weights=rates[flows.inc_flow], minlength=links.capacity.size)


def global_factor(flows: Flows, links: LinkIndex, rates: np.ndarray) -> float:
    """Alg. 1 S10: phi = min over loaded links of capacity / load (inf if no link is loaded)."""
    load = link_loads(flows, links, rates)
    used = load > 0
    return float((links.capacity[used] / load[used]).min()) if used.any() else float("inf")


def scale_fabric(flows: Flows, rates: np.ndarray, factor: float) -> np.ndarray:
    """Multiply the rates of fabric flows (not intra-server ones) by ``factor``."""
    out = rates.copy()
    net = flows.src != flows.dst
    out[net] *= factor
    return out


def fill_residual(flows: Flows, links: LinkIndex, rates: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Share the capacity left by ``rates`` by weighted max-min among flows whose links all have
    spare capacity (``weights`` per flow); returns the new rates. Afterwards every fabric flow
    crosses a saturated link (work conservation in the strong sense)."""
    cap = links.capacity
    residual = cap - link_loads(flows, links, rates)
    full = residual <= SATURATED_RTOL * cap
    blocked = np.zeros(rates.size, dtype=bool)
    blocked[flows.inc_flow[full[flows.inc_link]]] = True
    net = flows.src != flows.dst
    elig = net & ~blocked
    if not elig.any():
        return rates
    idx = np.flatnonzero(elig)
    pos = np.full(rates.size, -1, dtype=np.intp)
    pos[idx] = np.arange(idx.size)
    keep = elig[flows.inc_flow]
    extra = max_min_rates(pos[flows.inc_flow[keep]], flows.inc_link[keep], weights[idx],
                          np.full(idx.size, np.inf), np.maximum(residual, 0.0))
    out = rates.copy()
    out[idx] += extra
    return out


def priority_fill(flows: Flows, links: LinkIndex, order: list[int], first_only: bool = False,
                  start: np.ndarray | None = None, fast: bool = True, base: np.ndarray | None = None) -> np.ndarray:
    """Greedy filling: coflows in ``order`` (coflow indices) each get their O3 rates times
    min{1, min_l R_l / b_l} of the capacity R (bytes/s) left by earlier ones,
    b_l = the coflow's O3 load on link l (bytes/s). Returns every flow's rate, bytes/s.
    ``first_only``: coflows after the first get rate 0 (the "-wo-WC" baselines).
    ``start``: rates already given (bytes/s); the filling then adds to them within the capacity they leave.
    ``base``: the flows' O3 rates (:func:`coflow_o3_rates`) if the caller has them.
    ``fast`` (default): every coflow's link loads from one bincount (a coflows x links matrix), the
    sequential loop on Python floats over each coflow's loaded links only, the rates set in one step
    after it; the same operations on the same numbers as the reference (``fast=False``), so the rates
    are identical (``tests/test_parrot.py``)."""
    if base is None:
        base = coflow_o3_rates(flows, links)
    net = flows.src != flows.dst
    if start is None:
        rates = np.where(net, 0.0, base)
        residual = links.capacity.copy()
    else:
        rates = start.copy()
        residual = links.capacity - link_loads(flows, links, rates)
    if fast:
        n_c, n_l = flows.n_coflows, residual.size
        loads = np.bincount(flows.cf[flows.inc_flow] * n_l + flows.inc_link, weights=base[flows.inc_flow],
                            minlength=n_c * n_l)
        # the loaded (coflow, link) cells in row-major order: coflow c's are cells[bounds[c]:bounds[c + 1]];
        # subtracting load * f only there equals the dense update (elsewhere it subtracts exactly 0)
        cells = np.flatnonzero(loads > 0)
        bounds = np.searchsorted(cells, np.arange(n_c + 1) * n_l)
        factor = np.zeros(n_c)
        sel = np.asarray(order[:1] if first_only else order, dtype=np.int64)
        from raytestbed.network.waterfill import coflow_fill  # compiled (numba)

        coflow_fill(sel, bounds.astype(np.int64), (cells % n_l).astype(np.int64), loads[cells], residual.copy(), factor)
        add = base * factor[flows.cf]
        return np.where(net, rates + add, rates)
    # incidence ranges per coflow (incidences are grouped by flow, flows by coflow)
    inc_cf = flows.cf[flows.inc_flow]
    starts = np.searchsorted(inc_cf, np.arange(flows.n_coflows + 1))
    fstarts = np.searchsorted(flows.cf, np.arange(flows.n_coflows + 1))
    for n, c in enumerate(order):
        if first_only and n > 0:
            break
        a, b = starts[c], starts[c + 1]
        fa, fb = fstarts[c], fstarts[c + 1]
        lk = flows.inc_link[a:b]
        if lk.size == 0:
            continue
        load = np.bincount(lk, weights=base[flows.inc_flow[a:b]], minlength=residual.size)
        used = load > 0
        factor = min(1.0, float((np.maximum(residual[used], 0.0) / load[used]).min()))
        sl = slice(fa, fb)
        if start is None:
            rates[sl] = np.where(net[sl], base[sl] * factor, base[sl])
        else:
            rates[sl] = np.where(net[sl], rates[sl] + base[sl] * factor, rates[sl])
        residual -= load * factor
    return rates


def greedy_backfill(flows: Flows, links: LinkIndex, rates: np.ndarray, order: list[int]) -> np.ndarray:
    """Work-conserving backfill (Varys, CoflowSim): coflows in ``order`` (coflow indices), flows in
    coflow order; each fabric flow adds the smallest capacity its links have left (bytes/s), which
    fills at least one of them. A link with at most ``SATURATED_RTOL`` of its capacity left counts
    as full. Returns the new rates (bytes/s)."""
    cap = links.capacity
    residual = cap - link_loads(flows, links, rates)
    full = residual <= SATURATED_RTOL * cap
    blocked = np.zeros(rates.size, dtype=bool)
    blocked[flows.inc_flow[full[flows.inc_link]]] = True
    cand = np.flatnonzero((flows.src != flows.dst) & ~blocked)  # flows that may get some capacity
    if cand.size == 0:
        return rates
    rank = np.empty(flows.n_coflows, dtype=np.intp)
    rank[np.asarray(order, dtype=np.intp)] = np.arange(len(order))
    cand = cand[np.lexsort((cand, rank[flows.cf[cand]]))]  # SEBF order, then flow order
    ptr = np.searchsorted(flows.inc_flow, np.arange(rates.size + 1)).astype(np.int64)
    out = rates.copy()
    from raytestbed.network.waterfill import greedy_fill  # compiled (numba)

    greedy_fill(cand.astype(np.int64), ptr, flows.inc_link.astype(np.int64), residual, SATURATED_RTOL * cap, out)
    return out


def port_share_rates(flows: Flows, links: LinkIndex, order: list[int]) -> np.ndarray:
    """CoflowSim DARK's rates (bytes/s): coflows in ``order`` each take, on the port capacity the
    coflows before it left, min(free egress / its flows there, free ingress / its flows there) per
    flow (:func:`raytestbed.network.waterfill.port_share_fill`); intra-server flows get intra_bps.
    Flat clusters only (NIC ports, no rack links)."""
    rates = np.where(flows.src != flows.dst, 0.0, links.intra_bps)
    cf_start = np.searchsorted(flows.cf, np.arange(flows.n_coflows + 1)).astype(np.int64)
    _port_share(links, order, cf_start, flows.src, flows.dst, links.capacity, rates)
    return rates


def port_share_together(flows: Flows, links: LinkIndex, rows: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The fabric flows ``rows`` taken together as one coflow, DARK's per-port share of ``capacity``
    (bytes/s per link): each gets min(free egress / flows there, free ingress / flows there) (CoflowSim
    SEBF's share for the coflows it could not serve). Returns their rates, bytes/s, in ``rows`` order.
    Flat clusters only."""
    rates = np.zeros(rows.size)
    _port_share(links, [0], np.array([0, rows.size], dtype=np.int64), flows.src[rows], flows.dst[rows], capacity,
                rates)
    return rates


def _port_share(links: LinkIndex, order, cf_start: np.ndarray, src: np.ndarray, dst: np.ndarray,
                capacity: np.ndarray, rates: np.ndarray) -> None:
    if links.n_racks:
        raise ValueError("port_share rates need a cluster without racks")
    from raytestbed.network.waterfill import port_share_fill  # compiled (numba)

    free = np.asarray(capacity, dtype=float)[:2 * links.n_servers].copy()
    port_share_fill(np.asarray(order, dtype=np.int64), cf_start, src.astype(np.int64), dst.astype(np.int64),
                    links.n_servers, free, rates)
