"""Weighted max-min fair rate allocation over capacitated links.

A *link* has a capacity ``C_l`` (bytes/s).  A *flow* ``f`` crosses a set of
links ``P_f``, has a weight ``w_f > 0`` and an optional per-flow rate cap
``c_f`` (bytes/s, ``math.inf`` when uncapped; used e.g. for intra-server
point-to-point links that are not modelled as shared links).

The allocation is the weighted max-min fair one, computed by *progressive
filling*: a common level ``L`` (bytes/s per unit weight) rises from 0 and
every unfrozen flow has rate ``r_f = w_f * L``.  Link ``l`` saturates when

    sum_{f frozen, l in P_f} r_f  +  L * sum_{f unfrozen, l in P_f} w_f  =  C_l

and then all its unfrozen flows freeze at their current rate; a flow also
freezes when ``w_f * L`` reaches ``c_f``.  Filling stops when every flow is
frozen.  The result satisfies the max-min certificate: each flow is either at
its cap, or crosses a saturated link on which its ``r_f / w_f`` is maximal.

The filling is written once, in compiled code (:func:`raytestbed.network.waterfill.fill_levels`);
every entry point here runs it: :class:`RateAllocator` (the emulator's fabric) keeps the flow set
incrementally (add/remove flows, change weights or capacities) and recomputes rates lazily, only
when :meth:`RateAllocator.rates` (or a derived query) is called after a change;
:func:`max_min_rates` takes flows as arrays (network policies' residual filling);
:func:`grouped_max_min_rates` takes flows in groups that cross the same links (the flow simulator).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


__all__ = ["RateAllocator", "UnknownFlowError", "UnknownLinkError", "max_min_rates"]

class UnknownLinkError(ValueError, KeyError):
    """A link id that was never added (catchable as ValueError or KeyError)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownFlowError(KeyError, ValueError):
    """A flow id that is not present (catchable as KeyError or ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class _Flow:
    links: tuple[int, ...]  # link indices, deduplicated
    weight: float
    cap: float  # bytes/s, math.inf when uncapped


def _check_capacity(link_id: Hashable, capacity: float) -> float:
    cap = float(capacity)
    if not (math.isfinite(cap) and cap > 0):
        raise ValueError(f"link {link_id!r}: capacity must be finite and > 0 bytes/s, got {capacity!r}")
    return cap


def _check_weight(flow_id: Hashable, weight: float) -> float:
    w = float(weight)
    if not (math.isfinite(w) and w > 0):
        raise ValueError(f"flow {flow_id!r}: weight must be finite and > 0, got {weight!r}")
    return w


class RateAllocator:
    """Weighted max-min fair rates for flows over capacitated links, by progressive filling.

    Capacities, caps and rates are in bytes/s; weights are dimensionless.
    """

    def __init__(self, capacities: Mapping[Hashable, float] | None = None) -> None:
        self._link_index: dict[Hashable, int] = {}
        self._link_ids: list[Hashable] = []
        self._capacity: list[float] = []
        self._flows: dict[Hashable, _Flow] = {}
        # Cached structure arrays (rebuilt when flows/links are added or removed).
        self._structure_dirty = True
        self._values_dirty = True
        self._flow_ids: list[Hashable] = []
        self._flow_pos: dict[Hashable, int] = {}
        self._inc_flow = np.zeros(0, dtype=np.intp)  # incidence: flow index
        self._inc_link = np.zeros(0, dtype=np.intp)  # incidence: link index
        self._w = np.zeros(0)  # weight per flow
        self._c = np.zeros(0)  # cap per flow, bytes/s
        self._cap_arr = np.zeros(0)  # capacity per link, bytes/s
        # Cached results.
        self._rate_arr = np.zeros(0)
        self._rates: dict[Hashable, float] = {}
        self._load: np.ndarray | None = None
        for link_id, capacity in (capacities or {}).items():
            self.add_link(link_id, capacity)

    # ------------------------------------------------------------------ links
    def add_link(self, link_id: Hashable, capacity: float) -> None:
        """Add a link of ``capacity`` bytes/s (finite, > 0); duplicate id -> ValueError."""
        if link_id in self._link_index:
            raise ValueError(f"link {link_id!r} already exists; use set_capacity to change it")
        cap = _check_capacity(link_id, capacity)
        self._link_index[link_id] = len(self._link_ids)
        self._link_ids.append(link_id)
        self._capacity.append(cap)
        self._structure_dirty = True

    def set_capacity(self, link_id: Hashable, capacity: float) -> None:
        """Change a link's capacity (bytes/s, finite, > 0), e.g. to inject a slow link."""
        idx = self._link(link_id)
        cap = _check_capacity(link_id, capacity)
        self._capacity[idx] = cap
        if not self._structure_dirty:
            self._cap_arr[idx] = cap
        self._values_dirty = True

    def capacity(self, link_id: Hashable) -> float:
        """Capacity of ``link_id`` in bytes/s."""
        return self._capacity[self._link(link_id)]

    def links(self) -> list[Hashable]:
        """Link ids in insertion order."""
        return list(self._link_ids)

    def _link(self, link_id: Hashable) -> int:
        try:
            return self._link_index[link_id]
        except (KeyError, TypeError):
            raise UnknownLinkError(f"unknown link {link_id!r}") from None

    # ------------------------------------------------------------------ flows
    def add_flow(
        self,
        flow_id: Hashable,
        links: Sequence[Hashable],
        weight: float = 1.0,
        cap: float = math.inf,
    ) -> None:
        """Add a flow crossing ``links`` with ``weight`` > 0 and rate cap ``cap`` bytes/s.

        A link listed twice counts once.  A flow with no links must have a
        finite cap (its rate is then the cap).  Unknown link, duplicate flow
        id or invalid weight/cap -> ValueError.
        """
        if flow_id in self._flows:
            raise ValueError(f"flow {flow_id!r} already exists")
        if isinstance(links, (str, bytes)):
            raise ValueError(f"flow {flow_id!r}: links must be a sequence of link ids, got {links!r}")
        idx: dict[int, None] = {}
        for link_id in links:
            if link_id not in self._link_index:
                raise ValueError(f"flow {flow_id!r}: unknown link {link_id!r}")
            idx[self._link_index[link_id]] = None
        w = _check_weight(flow_id, weight)
        c = float(cap)
        if math.isnan(c) or c <= 0:
            raise ValueError(f"flow {flow_id!r}: cap must be > 0 bytes/s, got {cap!r}")
        if not idx and math.isinf(c):
            raise ValueError(f"flow {flow_id!r}: a flow crossing no link needs a finite cap")
        self._flows[flow_id] = _Flow(tuple(idx), w, c)
        self._structure_dirty = True

    def remove_flow(self, flow_id: Hashable) -> None:
        """Remove a flow; unknown id -> KeyError."""
        try:
            del self._flows[flow_id]
        except KeyError:
            raise UnknownFlowError(f"unknown flow {flow_id!r}") from None
        self._structure_dirty = True

    def set_weight(self, flow_id: Hashable, weight: float) -> None:
        """Change one flow's weight (> 0)."""
        self.set_weights({flow_id: weight})

    def set_weights(self, weights: Mapping[Hashable, float]) -> None:
        """Change several flows' weights at once; all are validated before any is applied."""
        checked: list[tuple[Hashable, float]] = []
        for flow_id, weight in weights.items():
            if flow_id not in self._flows:
                raise UnknownFlowError(f"unknown flow {flow_id!r}")
            checked.append((flow_id, _check_weight(flow_id, weight)))
        for flow_id, w in checked:
            self._flows[flow_id].weight = w
            if not self._structure_dirty:
                self._w[self._flow_pos[flow_id]] = w
        if checked:
            self._values_dirty = True

    def flows(self) -> list[Hashable]:
        """Flow ids in insertion order."""
        return list(self._flows)

    def __len__(self) -> int:
        return len(self._flows)

    def __contains__(self, flow_id: object) -> bool:
        try:
            return flow_id in self._flows
        except TypeError:
            return False

    # ---------------------------------------------------------------- results
    def rates(self) -> dict[Hashable, float]:
        """Rate of every flow in bytes/s (a fresh dict; recomputed only after a change)."""
        self._refresh()
        return dict(self._rates)

    def rate(self, flow_id: Hashable) -> float:
        """Rate of one flow in bytes/s; unknown id -> KeyError."""
        if flow_id not in self._flows:
            raise UnknownFlowError(f"unknown flow {flow_id!r}")
        self._refresh()
        return self._rates[flow_id]

    def link_load(self, link_id: Hashable) -> float:
        """Sum of the current rates (bytes/s) of the flows crossing ``link_id``."""
        idx = self._link(link_id)
        self._refresh()
        if self._load is None:
            self._load = np.bincount(
                self._inc_link, weights=self._rate_arr[self._inc_flow], minlength=len(self._link_ids)
            )
        return float(self._load[idx])

    # --------------------------------------------------------------- internals
    def _rebuild(self) -> None:
        """Rebuild the incidence and value arrays from the flow and link tables."""
        self._flow_ids = list(self._flows)
        self._flow_pos = {f: i for i, f in enumerate(self._flow_ids)}
        flows = list(self._flows.values())
        counts = np.fromiter((len(fl.links) for fl in flows), dtype=np.intp, count=len(flows))
        self._inc_flow = np.repeat(np.arange(len(flows), dtype=np.intp), counts)
        self._inc_link = np.fromiter(
            (l for fl in flows for l in fl.links), dtype=np.intp, count=int(counts.sum())
        )
        self._w = np.fromiter((fl.weight for fl in flows), dtype=float, count=len(flows))
        self._c = np.fromiter((fl.cap for fl in flows), dtype=float, count=len(flows))
        self._cap_arr = np.array(self._capacity, dtype=float)
        self._structure_dirty = False
        self._values_dirty = True

    def _refresh(self) -> None:
        if self._structure_dirty:
            self._rebuild()
        if self._values_dirty:
            self._rate_arr = max_min_rates(self._inc_flow, self._inc_link, self._w, self._c, self._cap_arr)
            self._rates = dict(zip(self._flow_ids, self._rate_arr.tolist()))
            self._load = None
            self._values_dirty = False


def max_min_rates(
    inc_flow: np.ndarray,
    inc_link: np.ndarray,
    weight: np.ndarray,
    cap: np.ndarray,
    capacity: np.ndarray,
) -> np.ndarray:
    """Weighted max-min fair rates (bytes/s) for flows given as arrays (what :class:`RateAllocator`
    computes, without building one): flow ``inc_flow[k]`` crosses link ``inc_link[k]``; ``weight``,
    ``cap`` (bytes/s, inf = none) per flow; ``capacity`` (bytes/s, > 0) per link.

    The filling is the flow simulator's (:func:`raytestbed.network.waterfill.fill_levels`, one link
    at a time in compiled code), each flow a group of its own: a flow's finite cap is a private link
    of capacity ``c_f`` (its level ``c_f / w_f``, module docstring), and a flow that crosses no link
    runs at its (finite) cap."""
    from raytestbed.network.waterfill import fill_levels, link_members  # compiled (numba): imported on first use

    inc_flow = np.asarray(inc_flow, dtype=np.int64)
    inc_link = np.asarray(inc_link, dtype=np.int64)
    weight, cap = np.asarray(weight, dtype=float), np.asarray(cap, dtype=float)
    capacity = np.asarray(capacity, dtype=float)
    n = weight.size
    counts = np.bincount(inc_flow, minlength=n)
    on = counts > 0
    capped = np.flatnonzero(on & np.isfinite(cap))
    k = (int(counts.max()) if n else 0) + (1 if capped.size else 0)
    group_links = np.full((n, max(k, 1)), -1, dtype=np.int64)
    order = np.argsort(inc_flow, kind="stable")
    fl = inc_flow[order]
    group_links[fl, np.arange(fl.size) - (np.cumsum(counts) - counts)[fl]] = inc_link[order]
    group_links[capped, counts[capped]] = capacity.size + np.arange(capped.size)
    links_cap = np.concatenate([capacity, cap[capped]])
    ptr, members = link_members(group_links, links_cap.size)
    level = fill_levels(group_links, np.where(on, weight, 0.0), links_cap, ptr, members, np.empty(n))
    return np.where(on, weight * level, cap)


def grouped_max_min_rates(
    group: np.ndarray,
    weight: np.ndarray,
    group_links: np.ndarray,
    capacity: np.ndarray,
) -> np.ndarray:
    """Weighted max-min fair rates (bytes/s) of uncapped flows that come in *groups* of flows
    crossing the same links (e.g. every flow between one pair of servers).

    Flow ``f`` belongs to group ``group[f]`` (0 <= group < G; < 0: left out, rate 0) and has weight
    ``weight[f]`` > 0;
    ``group_links`` is a (G, K) integer array of the link indices each group crosses (-1 pads a
    group that crosses fewer than K; every group crosses at least one); ``capacity`` (bytes/s,
    > 0) per link. Flows of one group freeze together in progressive filling at the same level
    (bytes/s per unit weight), so the filling runs once per group with the group's summed weight
    W_g, one link at a time in compiled code (:func:`raytestbed.network.waterfill.fill_levels`), and every flow gets
    ``weight[f] * level_g``. The same allocation as :class:`RateAllocator` up to rounding
    (``tests/test_allocator_grouped.py``); this is the flow simulator's allocator."""
    from raytestbed.network.waterfill import flow_rates  # compiled (numba): imported on first use

    group = np.ascontiguousarray(group, dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=float)
    if weight.size == 0:
        return np.zeros(0)
    return flow_rates(group, np.arange(weight.size, dtype=np.int64), weight,
                      np.ascontiguousarray(group_links, dtype=np.int64), np.ascontiguousarray(capacity, dtype=float))
