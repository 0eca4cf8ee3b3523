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
they are left out of (26) and get rate ``math.inf`` (they complete at once).
Zero-byte flows get rate 0.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

__all__ = ["o3_cct", "o3_cct_arrays", "o3_rates"]

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
    """
    _check_ports("egress", egress)
    _check_ports("ingress", ingress)
    sent: dict[Hashable, list[float]] = {}  # bytes leaving each server
    received: dict[Hashable, list[float]] = {}  # bytes entering each server
    for n, (src, dst, size) in enumerate(flows):
        v = float(size)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"flow {n} ({src!r} -> {dst!r}): bytes must be finite and >= 0, got {size!r}")
        if src not in egress:
            raise ValueError(f"flow {n}: unknown source server {src!r} (no egress capacity)")
        if dst not in ingress:
            raise ValueError(f"flow {n}: unknown destination server {dst!r} (no ingress capacity)")
        if src == dst or v == 0:
            continue
        sent.setdefault(src, []).append(v)
        received.setdefault(dst, []).append(v)
    gamma = 0.0
    for server, sizes in sent.items():
        gamma = max(gamma, math.fsum(sizes) / float(egress[server]))
    for server, sizes in received.items():
        gamma = max(gamma, math.fsum(sizes) / float(ingress[server]))
    return gamma


def o3_rates(
    flows: Sequence[Flow],
    egress: Mapping[Hashable, float],
    ingress: Mapping[Hashable, float],
) -> tuple[float, list[float]]:
    """Gamma~ (seconds, eq. 26) and the rate of each flow in input order (bytes/s, eq. 27).

    Rates are ``b_ij = V_ij / Gamma~`` for fabric flows, ``math.inf`` for
    same-server flows with bytes > 0 and 0.0 for zero-byte flows.
    """
    flows = list(flows)
    gamma = o3_cct(flows, egress, ingress)
    rates: list[float] = []
    for src, dst, size in flows:
        v = float(size)
        if v == 0:
            rates.append(0.0)
        elif src == dst:
            rates.append(math.inf)
        else:
            rates.append(v / gamma)
    return gamma, rates


def o3_cct_arrays(src, dst, nbytes, egress, ingress) -> float:
    """:func:`o3_cct` of one coflow given as arrays: flows ``src[k] -> dst[k]`` of ``nbytes[k]``
    bytes; ``egress``/``ingress``: per-server capacity arrays (bytes/s). Seconds (the per-server sums
    are added in flow order, so the last digit may differ from :func:`o3_cct`'s exact sums)."""
    import numpy as np

    src, dst, v = np.asarray(src), np.asarray(dst), np.asarray(nbytes, dtype=float)
    net = (src != dst) & (v > 0)
    if not net.any():
        return 0.0
    n = len(egress)
    sent = np.bincount(src[net], weights=v[net], minlength=n)
    recv = np.bincount(dst[net], weights=v[net], minlength=n)
    return float(max((sent / egress).max(), (recv / ingress).max()))
