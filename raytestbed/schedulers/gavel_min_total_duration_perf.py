"""Gavel's ``min_total_duration_perf``: minimum makespan across GPU types (Gavel §4.2).

The allocation in which every active job finishes its remaining iterations soonest under a fixed
allocation: maximize s such that throughput(j, X) >= r_j s for every job (M = 1/s, an LP:
:func:`raytestbed.schedulers.gavel_lp.min_total_duration`). Rounds:
:mod:`raytestbed.schedulers.gavel_base`.
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GAVEL_RESET_INTERVAL_S, GAVEL_ROUND_S, GavelRoundPolicy
from raytestbed.schedulers.gavel_lp import min_total_duration


@register_policy
class GavelMinTotalDurationPerfPolicy(GavelRoundPolicy):
    """Gavel makespan: the allocation that lets all active jobs finish soonest across GPU types (rounds)."""

    name = "min_total_duration_perf"
    perf = True

    def __init__(self, seed: int = 0, round_s: float = GAVEL_ROUND_S,
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S) -> None:
        super().__init__(seed, round_s, reset_interval_s)
        self.last_makespan_s = float("nan")

    def allocation(self, jobs, types, T, workers, view):
        r = np.array([self.remaining(j, view) for j in jobs])
        X, self.last_makespan_s = min_total_duration(T, np.array([j.gpus for j in jobs], dtype=float), r, workers)
        return X
