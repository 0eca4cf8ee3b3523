"""One SJF-BCO planning trial: an event-driven list-scheduling clock with eq. (8) timing.

SJF-BCO's completion times T_j depend on the contention of jobs that start later, so every (theta_u, kappa) trial of Algorithm 1 is
simulated: jobs are placed in order at the planning clock; when the current job
does not fit, the clock jumps to the next completion of a running job. Progress
is fractional: a job runs at 1 / tau_j iterations per second, where
tau_j is SJF-BCO eq. (8) (:func:`raytestbed.core.timing.sjfbco_iteration_time`)
re-evaluated for every split job whose contention count changes, i.e. whenever a
split job sharing one of its servers starts or ends.

The contention count p_j (eq. 6) is kept incrementally: ``nsplit[s]`` is the
number of running *split* jobs (0 < y_js < G_j) with workers on server s, and
p_j = max over j's servers of ``nsplit[s]`` (j included), which is what
:func:`raytestbed.core.timing.sjfbco_contention_count` computes from scratch.

Times are seconds from the start of the plan; loads U are seconds of estimated
execution time accumulated per GPU (Algorithm 1, U^g_s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.core.timing import SjfbcoParams, sjfbco_iteration_time


class PlanContext:
    """Everything constant across the trials of one search: cluster arrays, jobs, eq. (8) cache.

    Args:
        cluster: the cluster (b^e = ``cluster.nic_bps``, b^i = ``cluster.intra_bps``).
        params: constants of eq. (8).
    """

    def __init__(self, cluster: Cluster, params: SjfbcoParams = SjfbcoParams()) -> None:
        self.cluster = cluster
        self.params = params
        self.gpu_server = np.asarray(cluster.gpu_server, dtype=np.int64)
        self.capacity = np.array([s.gpus for s in cluster.servers], dtype=np.int64)  # O_s
        self.num_gpus = int(cluster.total_gpus)
        self.num_servers = cluster.num_servers
        self.gpu_ids = np.arange(self.num_gpus, dtype=np.int64)
        self.b_inter = cluster.nic_bps
        self.b_intra = cluster.intra_bps
        self._tau: dict[tuple[int, int, int], float] = {}

    def tau(self, job: Job, num_servers: int, contention: int) -> float:
        """tau_j of eq. (8) in seconds, cached per (job, #servers, p_j)."""
        key = (job.job_id, num_servers, contention)
        t = self._tau.get(key)
        if t is None:
            t = sjfbco_iteration_time(job, num_servers, contention, self.b_inter, self.b_intra, self.params)
            self._tau[key] = t
        return t

    def tau_lo(self, job: Job) -> float:
        """tau^lo_j: eq. (8) on one server, no contention, seconds."""
        return self.tau(job, 1, 0)


@dataclass(slots=True)
class _Running:
    job: Job
    gpus: np.ndarray
    servers: tuple[int, ...]
    split: bool
    remaining: float  # iterations
    tau: float = math.nan
    last: float = 0.0
    end: float = math.inf


@dataclass
class TrialResult:
    """Outcome of one trial. ``starts``/``finishes``: job id -> seconds; ``gpus``: job id -> GPU ids."""

    feasible: bool
    makespan: float
    starts: dict[int, float] = field(default_factory=dict)
    finishes: dict[int, float] = field(default_factory=dict)
    gpus: dict[int, tuple[int, ...]] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)


class ContentionTrial:
    """The planning clock of one trial.

    Args:
        ctx: the search context.
        running: jobs already holding GPUs when planning starts (online re-plan):
            (job, GPU ids, remaining iterations, remaining estimated seconds for U).
        blocked: GPUs that are never available (e.g. on lost servers).
    """

    def __init__(
        self,
        ctx: PlanContext,
        running: Sequence[tuple[Job, Sequence[int], float, float]] = (),
        blocked: Sequence[int] = (),
    ) -> None:
        self.ctx = ctx
        self.now = 0.0
        self.free = np.ones(ctx.num_gpus, dtype=bool)
        self.free[list(blocked)] = False
        self.U = np.zeros(ctx.num_gpus, dtype=float)
        self.free_count = np.bincount(ctx.gpu_server[self.free], minlength=ctx.num_servers).astype(np.int64)
        self._num_free = int(self.free.sum())
        self.nsplit = np.zeros(ctx.num_servers, dtype=np.int64)
        self.split_on: list[set[int]] = [set() for _ in range(ctx.num_servers)]
        self.jobs: dict[int, _Running] = {}
        self.result = TrialResult(True, 0.0)
        for job, gpus, remaining, est in running:
            g = np.asarray(gpus, dtype=np.int64)
            self.U[g] += est
            self._add(job, g, remaining, record=False)

    # -- placement -------------------------------------------------------------
    def start(self, job: Job, gpus: np.ndarray, rho: float) -> None:
        """Start ``job`` now on ``gpus``; add its estimated time ``rho`` (rho^_j / u) to their U."""
        self.U[gpus] += rho
        self._add(job, gpus, float(job.iterations), record=True)

    def _add(self, job: Job, gpus: np.ndarray, remaining: float, record: bool) -> None:
        srv = self.ctx.gpu_server[gpus]
        servers = tuple(int(s) for s in np.unique(srv))
        self.free[gpus] = False
        np.subtract.at(self.free_count, srv, 1)
        self._num_free -= len(gpus)
        split = len(servers) > 1
        r = _Running(job, gpus, servers, split, remaining, last=self.now)
        jid = job.job_id
        self.jobs[jid] = r
        if record:
            self.result.starts[jid] = self.now
            self.result.gpus[jid] = tuple(int(g) for g in gpus)
            self.result.order.append(jid)
        if split:
            for s in servers:
                self.nsplit[s] += 1
                self.split_on[s].add(jid)
            self._reprice(self._neighbours(servers))
        else:
            self._reprice((jid,))

    def _neighbours(self, servers: tuple[int, ...]) -> set[int]:
        out: set[int] = set()
        for s in servers:
            out |= self.split_on[s]
        return out

    def _reprice(self, jids) -> None:
        now, ctx, nsplit = self.now, self.ctx, self.nsplit
        for jid in jids:
            r = self.jobs[jid]
            if r.tau == r.tau:  # not NaN: sync progress at the old speed
                r.remaining -= (now - r.last) / r.tau
            if r.split:
                p = max(int(nsplit[s]) for s in r.servers)
                tau = ctx.tau(r.job, len(r.servers), p)
            else:
                tau = ctx.tau(r.job, 1, 0)
            r.tau = tau
            r.last = now
            r.end = now + max(r.remaining, 0.0) * tau

    # -- clock -------------------------------------------------------------------
    def advance(self) -> bool:
        """Jump to the next completion and retire every job ending then; False if nothing runs."""
        if not self.jobs:
            return False
        t = math.inf
        done: list[int] = []
        for jid, r in self.jobs.items():
            if r.end < t:
                t, done = r.end, [jid]
            elif r.end == t:
                done.append(jid)
        self.now = max(self.now, t)
        touched: set[int] = set()
        for jid in done:
            r = self.jobs.pop(jid)
            self.free[r.gpus] = True
            np.add.at(self.free_count, self.ctx.gpu_server[r.gpus], 1)
            self._num_free += len(r.gpus)
            if jid in self.result.starts:
                self.result.finishes[jid] = t
            if r.split:
                for s in r.servers:
                    self.nsplit[s] -= 1
                    self.split_on[s].discard(jid)
                touched |= self._neighbours(r.servers)
        if touched:
            self._reprice(touched)
        return True

    def finish(self) -> TrialResult:
        """Run every job to completion; the makespan is the last finish time (seconds)."""
        while self.advance():
            pass
        res = self.result
        res.makespan = max(res.finishes.values(), default=self.now)
        return res

    @property
    def num_free(self) -> int:
        """Free GPUs now."""
        return self._num_free
