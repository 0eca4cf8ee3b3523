"""Aalo baseline as Parrot evaluates it: least-bytes-sent first (spec parrot.md §6.2).

The paper's "conceptually equivalent" simplification of Aalo [PR §6], not Aalo's
multi-level queues: jobs with an active coflow are served in ascending order of
bytes sent so far (ties: arrival, id). Coflows are filled greedily in that
order, each with its O3 rates (eqs. 26-27) on its remaining bytes times
min{1, min_l R_l / b_l} of the capacity R left by the jobs before it (the paper's
"distributes residual bandwidth between remaining jobs", spec PR-12; default).
``fill_residual: true`` (an extension, default false since the reproduction
compares the greedy baselines) then shares the capacity still left by max-min
among flows whose links all have room. ``aalo-wo-wc`` serves only the first
job; the others wait.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.state import ClusterView
from raytestbed.network.coflow_rates import Flows, LinkIndex, fill_residual, priority_fill
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.coflow_base import FILL_RESIDUAL_DEFAULT, CoflowPolicy


class PriorityCoflowPolicy(CoflowPolicy):
    """Greedy coflow-level priority filling; subclasses define the job priority key."""

    work_conserving = True

    def __init__(self, seed: int = 0, fill_residual: bool = FILL_RESIDUAL_DEFAULT, observe_interval_s: float | None = None,
                 fast_path: bool = True) -> None:
        super().__init__(seed, observe_interval_s, fast_path)
        self.fill_residual = bool(fill_residual)

    def job_key(self, job_id: int, view: ClusterView) -> tuple:
        raise NotImplementedError

    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        order = sorted(range(flows.n_coflows), key=lambda c: (self.job_key(flows.coflow_job[c], view), c))
        rates = priority_fill(flows, links, order, first_only=not self.work_conserving, fast=self.fast_path)
        if self.work_conserving and self.fill_residual:
            rates = fill_residual(flows, links, rates, np.ones(rates.size), fast=self.fast_path)
        return rates


@register_policy
class AaloPolicy(PriorityCoflowPolicy):
    """Least bytes sent first, work conserving."""

    name = "aalo"
    description = "Aalo as in Parrot's evaluation: least-bytes-sent job first, leftover to the others"

    def job_key(self, job_id: int, view: ClusterView) -> tuple:
        rj = view.running[job_id]
        return (rj.bytes_sent, rj.job.arrival_s, job_id)


@register_policy
class AaloWoWcPolicy(AaloPolicy):
    """Least bytes sent first; only that job is served."""

    name = "aalo-wo-wc"
    description = "Aalo without work conservation: only the least-bytes-sent job gets bandwidth"
    work_conserving = False
