"""Gavel's ``max_min_fairness``: Least Attained Service, heterogeneity-agnostic (Gavel §4.1).

Every job gets an equal share of GPU time, weighted by its priority weight and its GPU count (a
job on one GPU gets ``sf`` times the time of a job on ``sf`` GPUs): the max-min program of
:func:`raytestbed.schedulers.gavel_lp.max_min_fairness` with every throughput 1, so the policy does
not tell GPU types apart; Gavel's rounds turn the shares into placements, filling types in a seeded
random order (:mod:`raytestbed.schedulers.gavel_base`).
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GavelRoundPolicy
from raytestbed.schedulers.gavel_lp import max_min_fairness


@register_policy
class GavelMaxMinFairnessPolicy(GavelRoundPolicy):
    """Gavel LAS: max-min fair GPU time, GPU types ignored (6-minute rounds, preemptive)."""

    name = "max_min_fairness"
    perf = False

    def allocation(self, jobs, types, T, workers, view):
        ones = np.ones_like(T)
        w = np.array([float(j.extra.get("priority_weight", 1.0)) for j in jobs])
        return max_min_fairness(ones, np.array([j.gpus for j in jobs], dtype=float), w, workers)
