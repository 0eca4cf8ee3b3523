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

Rates stay fixed until the next observed event (flows that finish early leave their bandwidth
idle until then, as in Varys and CoflowSim). Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.network.coflow_rates import Flows, LinkIndex, greedy_backfill, o3_gamma, o3_rates, priority_fill
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.coflow_base import CoflowPolicy

#: what SEBF orders by: the Gamma of the bytes left (Varys) or of the coflow's total bytes (CoflowSim)
SEBF_BYTES = ("remaining", "total")


@register_policy
class VarysPolicy(CoflowPolicy):
    """SEBF order, MADD rates, greedy backfill (module docstring)."""

    name = "varys"
    description = "Varys: smallest effective bottleneck first, MADD rates, work-conserving backfill (clairvoyant)"

    def __init__(self, seed: int = 0, sebf_bytes: str = "remaining", backfill: bool = True,
                 observe_interval_s: float | None = None, fast_path: bool = True) -> None:
        super().__init__(seed, observe_interval_s, fast_path)
        if sebf_bytes not in SEBF_BYTES:
            raise PolicyError(f"{self.name}: sebf_bytes must be one of {', '.join(SEBF_BYTES)}, got {sebf_bytes!r}")
        self.sebf_bytes = sebf_bytes
        self.backfill = bool(backfill)

    def sebf_order(self, flows: Flows, links: LinkIndex, view: ClusterView) -> list[int]:
        """Coflow indices in SEBF order (ascending Gamma, then job arrival, then coflow id)."""
        if self.sebf_bytes == "total":
            gamma = o3_gamma(flows, links, flows.total)
        else:
            gamma = o3_gamma(flows, links)
        running = view.running
        arrival = [running[j].job.arrival_s for j in flows.coflow_job]
        g = gamma.tolist()
        return sorted(range(flows.n_coflows), key=lambda c: (g[c], arrival[c], flows.coflow_ids[c]))

    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        order = self.sebf_order(flows, links, view)
        base = o3_rates(flows, links)
        rates = priority_fill(flows, links, order, fast=self.fast_path, base=base)
        if self.backfill:
            rates = greedy_backfill(flows, links, rates, order)
        return rates
