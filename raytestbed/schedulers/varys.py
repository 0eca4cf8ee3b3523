"""Varys: smallest effective bottleneck first (SEBF) + minimum allocation for desired duration (MADD).

The clairvoyant coflow scheduler of Chowdhury, Zhong and Stoica ("Efficient coflow scheduling
with Varys", SIGCOMM 2014), the baseline users of coflow schedulers expect beside Aalo. It knows
every active coflow's flow sizes. At every observed event (a coflow becomes valid or completes):

1. **SEBF.** Every active coflow's effective bottleneck on its bytes left with the whole fabric
   to itself, Gamma = max( max_i sum_j d_ij / C^E_i , max_j sum_i d_ij / C^I_j ) seconds (the
   same closed form as Parrot's O3, eq. 26; d_ij bytes, C bytes/s). Coflows are served in
   ascending Gamma (ties: job arrival, then coflow id). ``sebf_bytes: total`` orders by the
   Gamma of the coflow's *total* bytes instead (fixed at its start, as CoflowSim's SEBF does).
2. **MADD.** In that order each coflow gets, on the capacity R_l (bytes/s) left by the coflows
   before it, the slowest rates that still finish all its flows together as early as R allows:
   Gamma_R = max_l load_l / R_l and r_ij = d_ij / Gamma_R. A coflow one of whose links has no
   capacity left gets nothing in this pass. (Equal to the greedy O3 filling
   :func:`~raytestbed.network.coflow_rates.priority_fill` in SEBF order: its factor
   min{1, min_l R_l / b_l} times the O3 rates d_ij / Gamma is d_ij / Gamma_R.)
3. **Work-conserving backfill** (``backfill: true``, default): the capacity still left goes to
   single flows, coflows in SEBF order and flows in coflow order, each flow adding the smallest
   spare capacity of its links (:func:`~raytestbed.network.coflow_rates.greedy_backfill`).
   ``backfill_style: coflowsim`` does it as CoflowSim's SEBF does instead: first the coflows that
   got nothing in step 2, taken together as one coflow, share the spare port capacity, every flow
   min(free egress / flows there, free ingress / flows there) (the per-port share of
   :func:`~raytestbed.network.coflow_rates.port_share_together`); then the greedy backfill with the
   coflows in arrival order. Flat clusters only (NIC ports, no rack links).

Rates stay fixed until the next observed event (flows that finish early leave their bandwidth
idle until then, as in Varys and CoflowSim). Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.flows import Flows, LinkIndex
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.network.coflow_rates import (
    coflow_gamma,
    coflow_o3_rates,
    greedy_backfill,
    link_loads,
    port_share_together,
    priority_fill,
)
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.coflow_base import CoflowPolicy

#: what SEBF orders by: the Gamma of the bytes left (Varys) or of the coflow's total bytes (CoflowSim)
SEBF_BYTES = ("remaining", "total")
#: how the capacity MADD leaves is handed out: greedy in SEBF order, or as CoflowSim's SEBF does
BACKFILL_STYLES = ("sebf", "coflowsim")


@register_policy
class VarysPolicy(CoflowPolicy):
    """SEBF order, MADD rates, greedy backfill (module docstring)."""

    name = "varys"
    description = "Varys: smallest effective bottleneck first, MADD rates, work-conserving backfill (clairvoyant)"

    def __init__(self, seed: int = 0, sebf_bytes: str = "remaining", backfill: bool = True,
                 backfill_style: str = "sebf", observe_interval_s: float | None = None,
                 fast_path: bool = True) -> None:
        super().__init__(seed, observe_interval_s, fast_path)
        if sebf_bytes not in SEBF_BYTES:
            raise PolicyError(f"{self.name}: sebf_bytes must be one of {', '.join(SEBF_BYTES)}, got {sebf_bytes!r}")
        if backfill_style not in BACKFILL_STYLES:
            raise PolicyError(f"{self.name}: backfill_style must be one of {', '.join(BACKFILL_STYLES)}, "
                              f"got {backfill_style!r}")
        self.sebf_bytes = sebf_bytes
        self.backfill = bool(backfill)
        self.backfill_style = backfill_style

    def sebf_order(self, flows: Flows, links: LinkIndex, view: ClusterView) -> list[int]:
        """Coflow indices in SEBF order (ascending Gamma, then job arrival, then coflow id)."""
        if self.sebf_bytes == "total":
            gamma = coflow_gamma(flows, links, flows.total)
        else:
            gamma = coflow_gamma(flows, links)
        running = view.running
        arrival = [running[j].job.arrival_s for j in flows.coflow_job]
        g = gamma.tolist()
        return sorted(range(flows.n_coflows), key=lambda c: (g[c], arrival[c], flows.coflow_ids[c]))

    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        order = self.sebf_order(flows, links, view)
        base = coflow_o3_rates(flows, links)
        rates = priority_fill(flows, links, order, fast=self.fast_path, base=base)
        if not self.backfill:
            return rates
        if self.backfill_style == "coflowsim":
            rates = self._share_among_skipped(flows, links, rates)
            order = list(range(flows.n_coflows))  # (a Flows table lists its coflows by job arrival)
        return greedy_backfill(flows, links, rates, order)

    @staticmethod
    def _share_among_skipped(flows: Flows, links: LinkIndex, rates: np.ndarray) -> np.ndarray:
        """CoflowSim's first work-conserving step: the coflows whose fabric flows all got 0 from MADD
        (one of their links was full), taken as one coflow, share the port capacity left by the
        others, each of their flows min(free egress / flows there, free ingress / flows there)."""
        net = flows.src != flows.dst
        moving = np.bincount(flows.cf[net], weights=(rates[net] > 0).astype(float), minlength=flows.n_coflows)
        has_net = np.bincount(flows.cf[net], minlength=flows.n_coflows) > 0
        skipped = has_net & (moving == 0)
        rows = np.flatnonzero(skipped[flows.cf] & net)
        if rows.size == 0:
            return rates
        if links.n_racks:
            raise PolicyError("varys: backfill_style 'coflowsim' needs a cluster without racks")
        share = port_share_together(flows, links, rows, np.maximum(links.capacity - link_loads(flows, links, rates), 0.0))
        out = rates.copy()
        out[rows] += share
        return out
