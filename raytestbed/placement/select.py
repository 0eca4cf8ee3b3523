"""Server selection and A-SRPT placement estimates shared by A-SRPT and its baselines.

* :func:`most_available` / :func:`least_available`: walk the
  servers with free GPUs sorted by free count descending / ascending (ties by
  server id), taking all free GPUs of each until g_i are collected (the last
  server gives only what is still needed).
* :class:`AsrptEstimator`: per job configuration, alpha~min (eq. 7 on the
  fewest-servers layout mapped by Heavy-Edge, §IV-B), alpha^max (§III-B), and the
  iteration time of a Heavy-Edge placement on given server capacities — all
  cached, because recurring jobs share configurations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import FreePool
from raytestbed.core.timing import asrpt_alpha_max, asrpt_iteration_time, fewest_servers_layout
from raytestbed.errors import PolicyError
from raytestbed.placement.heavy_edge import heavy_edge_counts, heavy_edge_placement


def most_available(free: np.ndarray, need: int) -> list[tuple[int, int]]:
    """(server, GPUs to take) from the servers with the most free GPUs (ties: lower id)."""
    return _walk(free, need, descending=True)


def least_available(free: np.ndarray, need: int) -> list[tuple[int, int]]:
    """(server, GPUs to take) from the servers with the fewest free GPUs (ties: lower id)."""
    return _walk(free, need, descending=False)


def _walk(free: np.ndarray, need: int, descending: bool) -> list[tuple[int, int]]:
    if need <= 0:
        return []
    if need == 1 and descending:  # the most common job: the first server with the most free GPUs
        m = int(free.argmax())
        if free[m] > 0:
            return [(m, 1)]
    idx = np.flatnonzero(free)
    if need == 1 and idx.size:  # the first server with the fewest (> 0) free GPUs
        m = int(idx[int(np.argmin(free[idx]))])
        return [(m, 1)]
    vals = free[idx]
    order = idx[np.argsort(-vals if descending else vals, kind="stable")]
    out, left = [], need
    for m in order:
        take = min(int(free[m]), left)
        out.append((int(m), take))
        left -= take
        if left == 0:
            return out
    raise ValueError(f"only {need - left} free GPUs, need {need}")


class AsrptEstimator:
    """A-SRPT's per-job estimates on one cluster (identical servers), cached per configuration.

    Args:
        cluster: the cluster (g GPUs per server, B_inter, B_intra).
        seed: seed of Heavy-Edge's random fallback.
    """

    def __init__(self, cluster: Cluster, seed: int = 0) -> None:
        try:
            self.g = cluster.gpus_per_server
        except ValueError:
            raise PolicyError("A-SRPT and its baselines need identical servers (g GPUs each)") from None
        self.cluster = cluster
        self.b_inter = cluster.nic_bps
        self.b_intra = cluster.intra_bps
        self.seed = seed
        self._alpha: dict[tuple, float] = {}
        self._bounds: dict[tuple, tuple[float, float]] = {}

    def alpha(self, job: Job, capacities: Sequence[int]) -> float:
        """Eq. (7) for the Heavy-Edge mapping of ``job`` onto servers with these free-GPU counts, s."""
        caps = tuple(capacities)
        key = (job.stages, job.allreduce, caps)
        a = self._alpha.get(key)
        if a is None:
            counts = heavy_edge_counts(job, caps, self.seed)
            a = asrpt_iteration_time(job, dict(enumerate(counts)), self.g, self.b_inter, self.b_intra)
            self._alpha[key] = a
        return a

    def bounds(self, job: Job) -> tuple[float, float]:
        """(alpha~min_i, alpha^max_i) in seconds (A-SRPT §IV-B, §III-B)."""
        key = (job.stages, job.allreduce)
        b = self._bounds.get(key)
        if b is None:
            a_min = self.alpha(job, fewest_servers_layout(job.gpus, self.g))
            a_max = asrpt_alpha_max(job, self.g, self.b_inter, self.b_intra)
            b = (a_min, max(a_max, a_min))
            self._bounds[key] = b
        return b

    def comm_heavy(self, job: Job, threshold: float) -> bool:
        """A-SRPT's comm-heavy flag (Algorithm 1 L8): alpha^max_i / alpha~min_i >= ``threshold`` (COMM_HEAVY,
        paper 1.5). A comm-heavy job takes the servers with the most free GPUs, any other those with the
        fewest (L12 / L22)."""
        a_min, a_max = self.bounds(job)
        return a_max / a_min >= threshold

    def place(self, job: Job, pool: FreePool, selection: Sequence[tuple[int, int]],
              ps_servers: Sequence[int] = ()) -> Placement:
        """Take the selected GPUs from ``pool`` and map the replicas onto them with Heavy-Edge."""
        servers = [(m, pool.take(m, c)) for m, c in selection]
        return heavy_edge_placement(job, servers, self.seed, ps_servers)
