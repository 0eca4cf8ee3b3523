"""Gavel's ``max_min_fairness_perf``: heterogeneity-aware Least Attained Service (Gavel §4.1).

Maximizes the smallest normalised effective throughput, sf_j throughput(j, X) / (w_j throughput(j,
X_equal)), where X_equal is the equal time share of every type
(:func:`raytestbed.schedulers.gavel_lp.max_min_fairness` with the jobs' measured or estimated
throughputs per type); Gavel's rounds turn the shares into placements, filling the fastest type first
(:mod:`raytestbed.schedulers.gavel_base`).
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GavelRoundPolicy
from raytestbed.schedulers.gavel_lp import max_min_fairness


@register_policy
class GavelMaxMinFairnessPerfPolicy(GavelRoundPolicy):
    """Gavel heterogeneity-aware LAS: max-min fair normalised throughput across GPU types (rounds, preemptive)."""

    name = "max_min_fairness_perf"
    perf = True

    def allocation(self, jobs, types, T, workers, view):
        w = np.array([float(j.extra.get("priority_weight", 1.0)) for j in jobs])
        return max_min_fairness(T, np.array([j.gpus for j in jobs], dtype=float), w, workers)
