"""Parrot: coflow-aware bandwidth scheduling of parameter-server jobs.

At every observed event (a coflow becomes valid or completes; Alg. 1 S1) for the
jobs with an active coflow J_Omega (the jobs in a communication phase, §7):

1. LPCAS (Def. 5, S3): the inferred SRPT job is argmin of the key
   (A_m, S_m, arrival, id), A_m = S_m / Z_m with S_m the bytes the job has sent and
   Z_m its completed coflows; A_m = +inf while Z_m = 0 (option
   ``zero_coflows: plus_one`` uses S_m / (Z_m + 1)). Ascending, per Def. 5.
2. Occupancy ratio (eq. 10, S4):
   theta = min{theta_max, (1/|J|)^(1 / (ln(S/unit + 1) + 1))}, S = sum of S_m in
   bytes (``bytes_unit``), floored at 1/|J|. ``theta_mode: max`` uses
   theta_max as soon as any byte was sent (the paper's Fig. 2 worked example).
3. Weights (eq. 11, S5-6): W_max = theta / (1 - theta) (|J| - 1) for the inferred
   job, 1 for the others; a lone job has share 1.
4. Weighted scaling (S7-9): every coflow's O3 rates on its remaining bytes
   (eqs. 26-27) times W / sum W.
5. Work conservation (S10): all rates times phi = min_l C_l / L_l (one global
   factor, the paper's rule as written). Two optional passes follow, in this order:
   ``fill_order: lpcas`` (default) hands the capacity still left out greedily,
   coflow by coflow in the LPCAS order of Alg. 1 S3 (each adds its O3 rates times
   the largest factor that fits, as Aalo/LCCF here) -- our reading of S10 "a
   largest factor to scale the bandwidths of all flows in the sorted C_Omega*" as
   one factor per coflow in that order, which the paper does not confirm;
   ``fill_order: none`` (legacy spelling ``maxmin``) skips it. ``fill_residual``
   (default false) then shares what is still left by weighted max-min (the core
   allocator) among flows whose links all have room, so no link keeps spare
   capacity while a flow through it could use more (an extension).
   ``parrot-wo-wc`` skips step 5.

Defaults: ``fill_order: lpcas, fill_residual: false`` = the configuration
docs/results.md reports (S10 per coflow in LPCAS order; Aalo/LCCF greedy).
This departs from the paper's literal step 10, which uses the single global factor only:
on ms60 at 10 Gbps the paper-literal rule runs every non-inferred job at ~1/260
of its O3 rate and loses ~3.4x to Aalo (2896 vs 845 s total JCT), whereas the
per-coflow reading is <= Aalo and LCCF on 21 of 23 runs (robustness table) at
0.55 ms p50 per rate computation (docs/benchmarks.md; the former default's
max-min pass costs 5.8 ms). Other variants by parameter: paper-literal S10 =
``fill_order: none, fill_residual: false``; the former default (global factor +
max-min) = ``fill_order: none, fill_residual: true``.
"""

from __future__ import annotations

import math

import numpy as np

from raytestbed.core.flows import Flows, LinkIndex
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.network.coflow_rates import (
    coflow_o3_rates,
    fill_residual,
    global_factor,
    o3_scaled_rates,
    priority_fill,
    scale_fabric,
)
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.coflow_base import FILL_RESIDUAL_DEFAULT, CoflowPolicy


#: Default ``fill_order`` (module docstring: the reported configuration, departs from the paper's literal step 10).
FILL_ORDER_DEFAULT = "lpcas"


def parrot_theta(n_jobs: int, bytes_sent: float, theta_max: float, mode: str = "eq10",
                 bytes_unit: float = 1.0) -> float:
    """Occupancy ratio of the inferred job (eq. 10), floored at the fair share 1/|J|."""
    fair = 1.0 / n_jobs
    if mode == "max":
        theta = theta_max if bytes_sent > 0 else fair
    else:
        theta = min(theta_max, fair ** (1.0 / (math.log(bytes_sent / bytes_unit + 1.0) + 1.0)))
    return max(theta, fair)


def parrot_w_max(theta: float, n_jobs: int) -> float:
    """W_max = theta / (1 - theta) * (|J| - 1) (eq. 11)."""
    return theta / (1.0 - theta) * (n_jobs - 1)


def lpcas_key(bytes_sent: float, coflows_done: int, arrival_s: float, job_id: int,
              zero_coflows: str = "inf") -> tuple:
    """Sort key of LPCAS (Def. 5): least per-coflow attained service first."""
    if zero_coflows == "plus_one":
        a = bytes_sent / (coflows_done + 1)
    else:
        a = bytes_sent / coflows_done if coflows_done > 0 else math.inf
    return (a, bytes_sent, arrival_s, job_id)


@register_policy
class ParrotPolicy(CoflowPolicy):
    """Parrot (LPCAS + eq. 10/11 weights + O3 scaling + work conservation)."""

    name = "parrot"
    description = ("Parrot: LPCAS-inferred SRPT job weighted by occupancy ratio, O3 coflow rates, "
                   "work conserving (S10 per coflow in LPCAS order)")
    work_conserving = True

    def __init__(self, seed: int = 0, theta_max: float = 0.9, theta_mode: str = "eq10",
                 bytes_unit: float = 1.0, zero_coflows: str = "inf",
                 fill_residual: bool = FILL_RESIDUAL_DEFAULT, observe_interval_s: float | None = None,
                 fill_order: str = FILL_ORDER_DEFAULT, fast_path: bool = True) -> None:
        super().__init__(seed, observe_interval_s, fast_path)
        if not (0.0 < theta_max < 1.0):
            raise PolicyError(f"{self.name}: theta_max must be in (0, 1), got {theta_max!r}")
        if theta_mode not in ("eq10", "max"):
            raise PolicyError(f"{self.name}: theta_mode must be 'eq10' or 'max', got {theta_mode!r}")
        if zero_coflows not in ("inf", "plus_one"):
            raise PolicyError(f"{self.name}: zero_coflows must be 'inf' or 'plus_one', got {zero_coflows!r}")
        if fill_order == "maxmin":  # legacy spelling: no greedy pass (max-min is fill_residual's)
            fill_order = "none"
        if fill_order not in ("none", "lpcas"):
            raise PolicyError(f"{self.name}: fill_order must be 'none' or 'lpcas', got {fill_order!r}")
        if not (bytes_unit > 0):
            raise PolicyError(f"{self.name}: bytes_unit must be > 0, got {bytes_unit!r}")
        self.theta_max = float(theta_max)
        self.theta_mode = theta_mode
        self.bytes_unit = float(bytes_unit)
        self.zero_coflows = zero_coflows
        self.fill_residual = bool(fill_residual)
        self.fill_order = fill_order
        self._keys: dict[int, tuple] = {}
        self.last_theta = math.nan
        self.last_inferred: int | None = None

    def job_weights(self, jobs: list[int], view: ClusterView) -> dict[int, float]:
        """Alg. 1 S3-6: weight of every job in J_Omega (the jobs with an active coflow)."""
        running = view.running
        n = len(jobs)
        if n == 1:
            self.last_theta, self.last_inferred = 1.0, jobs[0]
            self._keys = {jobs[0]: ()}
            return {jobs[0]: 1.0}
        keys = {}
        total = 0.0
        for j in jobs:
            rj = running[j]
            total += rj.bytes_sent
            keys[j] = lpcas_key(rj.bytes_sent, rj.coflows_done, rj.job.arrival_s, j, self.zero_coflows)
        self._keys = keys
        inferred = min(jobs, key=keys.__getitem__)
        theta = parrot_theta(n, total, self.theta_max, self.theta_mode, self.bytes_unit)
        self.last_theta, self.last_inferred = theta, inferred
        w = {j: 1.0 for j in jobs}
        w[inferred] = parrot_w_max(theta, n)
        return w

    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        jobs = list(dict.fromkeys(flows.coflow_job))
        w = self.job_weights(jobs, view)
        cf_w = np.array([w[j] for j in flows.coflow_job], dtype=float)
        # one active coflow per job; if a job had several they would split its weight
        per_job = {j: 0 for j in jobs}
        for j in flows.coflow_job:
            per_job[j] += 1
        cf_w /= np.array([per_job[j] for j in flows.coflow_job], dtype=float)
        share = cf_w / cf_w.sum()
        base = coflow_o3_rates(flows, links)  # b^(O3), eqs. 26-27
        rates = o3_scaled_rates(flows, links, share, base=base)  # S7-9
        phi = global_factor(flows, links, rates)
        if not math.isfinite(phi):
            return rates
        if self.work_conserving:
            rates = scale_fabric(flows, rates, phi)
            if self.fill_order == "lpcas":
                order = sorted(range(flows.n_coflows), key=lambda c: (self._keys[flows.coflow_job[c]], c))
                rates = priority_fill(flows, links, order, start=rates, fast=self.fast_path, base=base)
            if self.fill_residual:
                rates = fill_residual(flows, links, rates, cf_w[flows.cf])
        elif phi < 1.0:  # only a rack link can be over-subscribed by the scaled O3 rates
            rates = scale_fabric(flows, rates, phi)
        return rates


@register_policy
class ParrotWoWcPolicy(ParrotPolicy):
    """Parrot without the work-conserving step (Alg. 1 S10 disabled)."""

    name = "parrot-wo-wc"
    description = "Parrot without work conservation (step 10 of Alg. 1 skipped)"
    work_conserving = False
