"""Gavel's ``finish_time_fairness_perf``: Themis' finish-time fairness, heterogeneity-aware (Gavel §4.2).

Minimizes the largest rho_j = (t_j + r_j / throughput(j, X)) / (c_j + r_j / throughput(j, X_iso)):
t_j seconds since the job arrived, r_j its iterations left, X_iso its isolated share (1/m of every
type) and c_j the isolated time its progress so far is worth — accumulated, as Gavel does, at every
allocation as (iterations done since the previous allocation) / (isolated throughput then)
(:func:`raytestbed.schedulers.gavel_lp.finish_time_fairness`, bisection over HiGHS LPs). Rounds:
:mod:`raytestbed.schedulers.gavel_base`.
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GAVEL_RESET_INTERVAL_S, GAVEL_ROUND_S, GavelRoundPolicy
from raytestbed.schedulers.gavel_lp import finish_time_fairness, isolated_share


@register_policy
class GavelFinishTimeFairnessPerfPolicy(GavelRoundPolicy):
    """Gavel/Themis finish-time fairness across GPU types: minimize the worst rho (rounds, preemptive)."""

    name = "finish_time_fairness_perf"
    perf = True

    def __init__(self, seed: int = 0, round_s: float = GAVEL_ROUND_S,
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S) -> None:
        super().__init__(seed, round_s, reset_interval_s)
        self.isolated_time: dict[int, float] = {}  #: c_j, seconds
        self._prev: dict[int, tuple[float, float]] = {}  #: job -> (iterations left, isolated iterations/s) then
        self.last_rho = float("nan")

    def allocation(self, jobs, types, T, workers, view):
        sf = np.array([j.gpus for j in jobs], dtype=float)
        r = np.array([self.remaining(j, view) for j in jobs])
        iso = (T * isolated_share(sf, workers)).sum(axis=1)
        for j, left in zip(jobs, r):
            c = self.isolated_time.get(j.job_id, 0.0)
            if j.job_id in self._prev:
                before, thr = self._prev[j.job_id]
                c += (before - left) / thr if thr > 0 else 0.0
            self.isolated_time[j.job_id] = c
        t = np.array([view.now - self.arrived_s[j.job_id] for j in jobs])
        c = np.array([self.isolated_time[j.job_id] for j in jobs])
        X, self.last_rho = finish_time_fairness(T, sf, t, c, r, workers)
        self._prev = {j.job_id: (float(left), float(th)) for j, left, th in zip(jobs, r, iso)}
        return X
