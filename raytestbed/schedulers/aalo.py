"""Aalo baseline as Parrot evaluates it: least-bytes-sent first.

The paper's "conceptually equivalent" simplification of Aalo [PR §6], not Aalo's
multi-level queues: jobs with an active coflow are served in ascending order of
bytes sent so far (ties: arrival, id). Coflows are filled greedily in that
order, each with its O3 rates (eqs. 26-27) on its remaining bytes times
min{1, min_l R_l / b_l} of the capacity R left by the jobs before it (the paper's
"distributes residual bandwidth between remaining jobs"; default).
``fill_residual: true`` (an extension, default false since the reproduction
compares the greedy baselines) then shares the capacity still left by max-min
among flows whose links all have room. ``aalo-wo-wc`` serves only the first
job; the others wait.

**Queues** (``queues: K``; default none = the strict order above): Aalo's own discretised
priorities (D-CLAS). A job is in queue q = the number of thresholds T_k = ``first_threshold_bytes``
x ``multiplier``^(k-1) below its bytes sent (at most K - 1); queues are served in order, FIFO
(job arrival) inside a queue. CoflowSim's DARK (the Aalo paper's simulator) uses K = 10, T_1 = 10 MiB
= 10,485,760 bytes, multiplier 10 -- the defaults of the two threshold parameters. Differences
that remain from DARK: DARK re-queues only when a coflow arrives or ends and moves a job by at most
one queue each time, and orders a queue by time of entry. ``coflow_rates: port_share`` (default
``o3``) splits bandwidth as DARK does: job by job in priority order, each flow gets the smaller of
its two ports' equal shares among the job's flows there, of the capacity the jobs before it left
(:func:`~raytestbed.network.coflow_rates.port_share_rates`; flat clusters only) instead of O3 rates
scaled to fit.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.flows import Flows, LinkIndex
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.network.coflow_rates import fill_residual, port_share_rates, priority_fill
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
            rates = fill_residual(flows, links, rates, np.ones(rates.size))
        return rates


#: CoflowSim's DARK: first queue threshold (bytes) and threshold multiplier
AALO_FIRST_THRESHOLD_BYTES = 10 * 1048576.0
AALO_MULTIPLIER = 10.0


@register_policy
class AaloPolicy(PriorityCoflowPolicy):
    """Least bytes sent first (or Aalo's queues, ``queues: K``), work conserving."""

    name = "aalo"
    description = "Aalo as in Parrot's evaluation: least-bytes-sent job first, leftover to the others"

    def __init__(self, seed: int = 0, queues: int | None = None,
                 first_threshold_bytes: float = AALO_FIRST_THRESHOLD_BYTES, multiplier: float = AALO_MULTIPLIER,
                 coflow_rates: str = "o3", fill_residual: bool = FILL_RESIDUAL_DEFAULT,
                 observe_interval_s: float | None = None, fast_path: bool = True) -> None:
        super().__init__(seed, fill_residual, observe_interval_s, fast_path)
        if coflow_rates not in ("o3", "port_share"):
            raise PolicyError(f"{self.name}: coflow_rates must be 'o3' or 'port_share', got {coflow_rates!r}")
        self.coflow_rates = coflow_rates
        if queues is not None and not (isinstance(queues, int) and queues >= 1):
            raise PolicyError(f"{self.name}: queues must be an integer >= 1 or null, got {queues!r}")
        if not (first_threshold_bytes > 0):
            raise PolicyError(f"{self.name}: first_threshold_bytes must be > 0, got {first_threshold_bytes!r}")
        if not (multiplier > 1):
            raise PolicyError(f"{self.name}: multiplier must be > 1, got {multiplier!r}")
        self.queues = queues
        self.first_threshold_bytes = float(first_threshold_bytes)
        self.multiplier = float(multiplier)

    def queue_of(self, bytes_sent: float) -> int:
        """Queue of a job that has sent ``bytes_sent`` bytes: thresholds below it, at most K - 1."""
        q, t = 0, self.first_threshold_bytes
        while t < bytes_sent and q < self.queues - 1:
            q += 1
            t *= self.multiplier
        return q

    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        if self.coflow_rates == "o3":
            return super().compute_rates(flows, links, view)
        order = sorted(range(flows.n_coflows), key=lambda c: (self.job_key(flows.coflow_job[c], view), c))
        if not self.work_conserving:
            order = order[:1]
        try:
            rates = port_share_rates(flows, links, order)
        except ValueError as e:
            raise PolicyError(f"{self.name}: {e}") from None
        if self.work_conserving and self.fill_residual:
            rates = fill_residual(flows, links, rates, np.ones(rates.size))
        return rates

    def job_key(self, job_id: int, view: ClusterView) -> tuple:
        rj = view.running[job_id]
        if self.queues is not None:
            return (self.queue_of(rj.bytes_sent), rj.job.arrival_s, job_id)
        return (rj.bytes_sent, rj.job.arrival_s, job_id)


@register_policy
class AaloWoWcPolicy(AaloPolicy):
    """Least bytes sent first; only that job is served."""

    name = "aalo-wo-wc"
    description = "Aalo without work conservation: only the least-bytes-sent job gets bandwidth"
    work_conserving = False
