"""Parrot's single-coflow optimum (problem O3) in closed form.

A coflow is a set of flows ``(i, j, V_ij)``: ``V_ij`` bytes from server ``i``
to server ``j``.  Server ``i`` has egress capacity ``U^E_i`` and server ``j``
ingress capacity ``U^I_j`` (bytes/s).  Problem O3 of the Parrot paper is

    min Gamma  s.t.  Gamma * b_ij = V_ij,
                     sum_j b_ij <= U^E_i   for every i,
                     sum_i b_ij <= U^I_j   for every j,

i.e. all flows finish together at the coflow completion time ``Gamma``
(seconds) with rates ``b_ij`` (bytes/s).  Its optimum is

    Gamma~ = max( max_i sum_j V_ij / U^E_i ,  max_j sum_i V_ij / U^I_j )   (eq. 26)
    b_ij   = V_ij / Gamma~                                                 (eq. 27)

Flows with ``i == j`` stay inside one server and do not cross the fabric:
they are left out of (26) and get the intra-server rate (``math.inf`` unless
given: they complete at once).

:func:`o3_gamma` and :func:`o3_rates` are the closed form, once, on arrays of
flows of many coflows at a time (the network policies' flow table, the flow
simulator's lower bounds; each server's bytes summed in flow order);
:func:`o3_cct` reads one coflow given as ``(src, dst, bytes)`` tuples and
per-server capacity mappings (the analytic PS model), checks them and sums
each server's bytes exactly. Both end in :func:`o3_gamma_of_loads`, eq. (26)
itself.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping

import numpy as np

__all__ = ["o3_cct", "o3_gamma", "o3_gamma_of_loads", "o3_rates"]

Flow = tuple[Hashable, Hashable, float]  # (src server, dst server, bytes)


def _check_ports(kind: str, capacities: Mapping[Hashable, float]) -> None:
    for server, capacity in capacities.items():
        c = float(capacity)
        if not (math.isfinite(c) and c > 0):
            raise ValueError(f"{kind} capacity of server {server!r} must be finite and > 0 bytes/s, got {capacity!r}")


def o3_cct(
    flows: Iterable[Flow],
    egress: Mapping[Hashable, float],
    ingress: Mapping[Hashable, float],
) -> float:
    """Optimal completion time Gamma~ (seconds) of one coflow, eq. (26).

    ``flows`` yields ``(src, dst, bytes)``; ``egress[src]`` and ``ingress[dst]``
    are port capacities in bytes/s.  Every src must be in ``egress`` and every
    dst in ``ingress`` (also for same-server flows), else ValueError naming the
    server.  Returns 0.0 when no flow crosses the fabric with bytes > 0.
    Checks the input, sums each server's bytes exactly (``math.fsum``), then
    :func:`o3_gamma_of_loads`.
    """
    _check_ports("egress", egress)
    _check_ports("ingress", ingress)
    flows = list(flows)
    for n, (src, dst, size) in enumerate(flows):
        v = float(size)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"flow {n} ({src!r} -> {dst!r}): bytes must be finite and >= 0, got {size!r}")
        if src not in egress:
            raise ValueError(f"flow {n}: unknown source server {src!r} (no egress capacity)")
        if dst not in ingress:
            raise ValueError(f"flow {n}: unknown destination server {dst!r} (no ingress capacity)")
    if not flows:
        return 0.0
    index = {s: i for i, s in enumerate(dict.fromkeys([*egress, *ingress]))}
    sent: dict[int, list[float]] = {}  # bytes leaving each server
    received: dict[int, list[float]] = {}  # bytes entering each server
    for src, dst, size in flows:
        if src != dst and float(size) > 0:
            sent.setdefault(index[src], []).append(float(size))
            received.setdefault(index[dst], []).append(float(size))
    loads = np.zeros((2, len(index)))
    for row, by_server in ((0, sent), (1, received)):
        for i, sizes in by_server.items():
            loads[row, i] = math.fsum(sizes)  # exact sums
    cap = np.full((2, len(index)), np.inf)
    for row, ports in ((0, egress), (1, ingress)):
        for server, c in ports.items():
            cap[row, index[server]] = float(c)
    return float(o3_gamma_of_loads(loads[0], loads[1], cap[0], cap[1]))


def o3_gamma_of_loads(sent, recv, egress, ingress) -> np.ndarray:
    """Eq. (26) from per-server loads: Gamma~ = max(max_i sent_i / U^E_i, max_j recv_j / U^I_j), seconds;
    ``sent[..., i]``: a coflow's bytes leaving server i, ``recv[..., j]``: entering server j (over the
    last axis, one coflow per row); ``egress``, ``ingress``: per-server capacities (bytes/s)."""
    return np.maximum((sent / egress).max(axis=-1), (recv / ingress).max(axis=-1))


def o3_gamma(src, dst, nbytes, egress, ingress, cf=None, n_coflows: int = 1) -> np.ndarray:
    """Gamma~ (eq. 26), seconds, of every coflow: flow k of coflow ``cf[k]`` (0 <= cf < ``n_coflows``;
    None: all of coflow 0) sends ``nbytes[k]`` bytes from server ``src[k]`` to server ``dst[k]``
    (indices into the per-server capacity arrays ``egress`` and ``ingress``, bytes/s). Same-server
    flows are left out; a coflow without fabric bytes gets 0. A server's bytes are summed in flow
    order."""
    src, dst = np.asarray(src), np.asarray(dst)
    v = np.asarray(nbytes, dtype=float)
    cf = np.zeros(src.size, dtype=np.int64) if cf is None else np.asarray(cf)
    c, n = n_coflows, len(egress)
    net = src != dst
    sent = np.bincount(cf[net] * n + src[net], weights=v[net], minlength=c * n).reshape(c, n)
    recv = np.bincount(cf[net] * n + dst[net], weights=v[net], minlength=c * n).reshape(c, n)
    if c == 0:
        return np.zeros(0)
    return o3_gamma_of_loads(sent, recv, egress, ingress)


def o3_rates(src, dst, nbytes, egress, ingress, cf=None, n_coflows: int = 1,
             intra_rate: float = math.inf) -> np.ndarray:
    """b = V / Gamma~ (eq. 27), bytes/s, of every flow (arguments as :func:`o3_gamma`): all fabric
    flows of a coflow finish together at its Gamma~; same-server flows get ``intra_rate``."""
    src, dst = np.asarray(src), np.asarray(dst)
    v = np.asarray(nbytes, dtype=float)
    cf = np.zeros(src.size, dtype=np.int64) if cf is None else np.asarray(cf)
    gamma = o3_gamma(src, dst, v, egress, ingress, cf, n_coflows)
    net = src != dst
    rates = np.full(v.size, float(intra_rate))
    rates[net] = v[net] / gamma[cf[net]]
    return rates
