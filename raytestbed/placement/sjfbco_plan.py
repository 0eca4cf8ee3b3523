"""SJF-BCO (Yu et al., MobiHoc'22, Algorithms 1-3) and its baselines FF, LS, RAND as offline planners.

Algorithm 1: jobs sorted by G_j (smallest first, ties by job
id); integer bisection on the per-GPU budget theta_u over [1, T] (a budget whose
best makespan is no worse than the best so far moves ``right`` down, anything
else moves ``left`` up; the printed strict rule of L25 is available as
``bisection="listing"``, see :meth:`SjfbcoPlanner._bisect`); for each theta_u every
kappa = 1..max G_j is a separate trial (U, clock and cluster reset) that
places G_j <= kappa jobs with FA-FFP (Alg. 2) and the others with LBSGF (Alg. 3);
an abandoned trial counts as makespan T. Trials run on the event-driven
clock of :mod:`raytestbed.placement.sjfbco_trial`, so T_j includes eq. (8)
contention from jobs that start later.

Estimated execution time rho^_j = F_j tau^lo_j with u = 1: the load a job
adds to each of its GPUs' U^g_s, in seconds. A GPU is available for job j when it
is free at the planning time and U + rho^_j <= theta_u.

Baselines: FF and LS use the same bisection without the
kappa loop; RAND uses theta_u = T (no search).

kappa values that split the jobs the same way (same set of sizes <= kappa) give
identical trials; each such trial is computed once per theta_u and reused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.core.timing import SjfbcoParams
from raytestbed.placement.sjfbco_trial import ContentionTrial, PlanContext, TrialResult

RULES = ("sjf-bco", "ff", "ls", "rand")

Selector = Callable[[ContentionTrial, Job, float, float], "np.ndarray | None"]
"""(trial, job, rho^_j, theta_u) -> the G_j GPU ids to use now, or None if it does not fit now."""


# ---------------------------------------------------------------------------
# GPU selection rules
# ---------------------------------------------------------------------------


def _eligible(trial: ContentionTrial, rho: float, theta: float) -> np.ndarray:
    """Mask of GPUs free now with U + rho^/u <= theta_u."""
    return trial.free & (trial.U + rho <= theta + 1e-9)


def fa_ffp(trial: ContentionTrial, job: Job, rho: float, theta: float) -> np.ndarray | None:
    """Algorithm 2, fragment-aware first-fit packing: the G_j available GPUs with the least U.

    Ties (impl.): GPUs on servers already hosting running jobs first, then
    servers with the fewest free GPUs (best fit), then server id, then GPU id.
    """
    ok = _eligible(trial, rho, theta)
    cand = np.flatnonzero(ok)
    if cand.size < job.gpus:
        return None
    ctx = trial.ctx
    srv = ctx.gpu_server[cand]
    fc = trial.free_count[srv]
    unused = (fc == ctx.capacity[srv]).astype(np.int8)  # server hosts no running job
    idx = np.lexsort((cand, srv, fc, unused, trial.U[cand]))
    return cand[idx[: job.gpus]]


def lbsgf_servers(trial: ContentionTrial, job: Job, lam: float = 1.0) -> np.ndarray:
    """Algorithm 3 L2: servers by average load sum_g U^g_s / O_s (ties by id), shortest prefix with
    sum O_s >= lambda_j G_j (capacity, not free GPUs)."""
    ctx = trial.ctx
    load = np.bincount(ctx.gpu_server, weights=trial.U, minlength=ctx.num_servers) / np.maximum(ctx.capacity, 1)
    order = np.lexsort((np.arange(ctx.num_servers), load))
    cum = np.cumsum(ctx.capacity[order])
    m = int(np.searchsorted(cum, lam * job.gpus - 1e-9)) + 1
    return order[: min(m, ctx.num_servers)]


def lbsgf(trial: ContentionTrial, job: Job, rho: float, theta: float, lam: float = 1.0,
          servers: np.ndarray | None = None) -> np.ndarray | None:
    """Algorithm 3, least-busy server-GPU first.

    The servers of :func:`lbsgf_servers` (or ``servers``, computed once per job:
    U does not change while the job waits, L13-14) contribute their available
    GPUs server by server, each server's sorted by U; the G_j with the least U
    are taken, ties in append order.
    """
    ctx = trial.ctx
    chosen = lbsgf_servers(trial, job, lam) if servers is None else servers
    rank = np.full(ctx.num_servers, -1, dtype=np.int64)
    rank[chosen] = np.arange(chosen.size)
    srv_rank_all = rank[ctx.gpu_server]
    cand = np.flatnonzero(_eligible(trial, rho, theta) & (srv_rank_all >= 0))
    if cand.size < job.gpus:
        return None
    u = trial.U[cand]
    appended = cand[np.lexsort((cand, u, srv_rank_all[cand]))]  # server order, then U within the server
    pick = np.argsort(trial.U[appended], kind="stable")[: job.gpus]
    return appended[pick]


def first_fit(trial: ContentionTrial, job: Job, rho: float, theta: float) -> np.ndarray | None:
    """FF baseline: the first G_j available GPUs, server by server, in id order."""
    cand = np.flatnonzero(_eligible(trial, rho, theta))
    return cand[: job.gpus] if cand.size >= job.gpus else None


def list_scheduling(trial: ContentionTrial, job: Job, rho: float, theta: float) -> np.ndarray | None:
    """LS baseline: the G_j available GPUs with the least U (ties by GPU id)."""
    cand = np.flatnonzero(_eligible(trial, rho, theta))
    if cand.size < job.gpus:
        return None
    return cand[np.argsort(trial.U[cand], kind="stable")[: job.gpus]]


def random_pick(rng: np.random.Generator) -> Selector:
    """RAND baseline: servers in random order, each server's available GPUs in random order."""

    def select(trial: ContentionTrial, job: Job, rho: float, theta: float) -> np.ndarray | None:
        cand = np.flatnonzero(_eligible(trial, rho, theta))
        if cand.size < job.gpus:
            return None
        ctx = trial.ctx
        srv_key = rng.permutation(ctx.num_servers)[ctx.gpu_server[cand]]
        gpu_key = rng.random(cand.size)
        return cand[np.lexsort((gpu_key, srv_key))[: job.gpus]]

    return select


# ---------------------------------------------------------------------------
# One trial and the search
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningInfo:
    """A job already holding GPUs when an online re-plan starts.

    ``remaining_iterations`` drive its completion in the trial; ``remaining_s``
    (estimated seconds left) initialises U on its GPUs.
    """

    job: Job
    gpus: tuple[int, ...]
    remaining_iterations: float
    remaining_s: float


@dataclass
class Plan:
    """A schedule found by a search.

    Attributes:
        rule: ``sjf-bco``, ``ff``, ``ls`` or ``rand``.
        feasible: False if no trial placed every job with makespan < T.
        makespan: estimated makespan in seconds (eq. 8 with contention), T if infeasible.
        theta: the budget theta~_u of the returned schedule (seconds); None if infeasible.
        kappa: the kappa of the returned schedule (sjf-bco only).
        order: job ids in start order; ``gpus``, ``starts``, ``finishes`` per job id.
        trials: trials simulated; horizon: T in seconds.
    """

    rule: str
    feasible: bool
    makespan: float
    horizon: float
    theta: int | None = None
    kappa: int | None = None
    order: list[int] = field(default_factory=list)
    gpus: dict[int, tuple[int, ...]] = field(default_factory=dict)
    starts: dict[int, float] = field(default_factory=dict)
    finishes: dict[int, float] = field(default_factory=dict)
    trials: int = 0

    @property
    def avg_jct_s(self) -> float:
        """Mean estimated completion time (all jobs released at plan time 0), seconds."""
        return float(np.mean(list(self.finishes.values()))) if self.finishes else math.nan


class SjfbcoPlanner:
    """Offline planner for one job set on one cluster.

    Args:
        cluster: the cluster.
        jobs: the jobs to plan (single-stage ring-all-reduce jobs).
        params: constants of eq. (8) used for estimates and trial timing.
        horizon_s: T, seconds.
        lam: lambda_j of LBSGF: one value for every job, or job id -> value (default 1).
        running: jobs already holding GPUs (online re-plan).
        blocked: GPUs that never become available.
        seed: seed of RAND.
        bisection: ``tightest`` (default) or ``listing`` update rule, see :meth:`_bisect`.
        ctx: a :class:`PlanContext` to reuse (its eq. (8) cache) when cluster and params match.
        dedupe_kappa: simulate one trial per distinct split {G_j <= kappa} (identical results);
            False runs every kappa of the loop literally (for benchmarking).
    """

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        params: SjfbcoParams = SjfbcoParams(),
        horizon_s: float = 1200.0,
        lam: float | dict[int, float] = 1.0,
        running: Sequence[RunningInfo] = (),
        blocked: Sequence[int] = (),
        seed: int = 0,
        bisection: str = "tightest",
        ctx: PlanContext | None = None,
        dedupe_kappa: bool = True,
    ) -> None:
        self.dedupe_kappa = dedupe_kappa
        if bisection not in ("tightest", "listing"):
            raise ValueError(f"bisection must be 'tightest' or 'listing', got {bisection!r}")
        self.bisection = bisection
        if not horizon_s >= 1:
            raise ValueError(f"horizon T must be >= 1 s, got {horizon_s}")
        self.ctx = ctx if ctx is not None and ctx.cluster is cluster and ctx.params == params \
            else PlanContext(cluster, params)
        self.jobs = sorted(jobs, key=lambda j: (j.gpus, j.job_id))  # J^s: smallest job first (L4)
        for j in self.jobs:
            if j.num_stages != 1:
                raise ValueError(f"job {j.job_id}: SJF-BCO plans single-stage (ring-all-reduce) jobs")
            if j.gpus > cluster.total_gpus - len(blocked):
                raise ValueError(f"job {j.job_id}: needs {j.gpus} GPUs, the cluster has "
                                 f"{cluster.total_gpus - len(blocked)} usable")
        self.rho = {j.job_id: j.iterations * self.ctx.tau_lo(j) for j in self.jobs}  # rho^_j / u, u = 1
        self.size = {j.job_id: j.gpus for j in self.jobs}
        self.horizon = float(horizon_s)
        self.lam = lam
        self.running = list(running)
        self.blocked = list(blocked)
        self.seed = seed
        self.trials = 0

    def _lam(self, job: Job) -> float:
        return self.lam.get(job.job_id, 1.0) if isinstance(self.lam, dict) else float(self.lam)

    # -- one trial ----------------------------------------------------------------
    def trial(self, theta: float, choose: Callable[[Job], Selector]) -> TrialResult:
        """Place every job in J^s order at the planning clock (waiting for completions when needed).

        Returns an infeasible result (makespan T) as soon as a job cannot be placed
        with nothing left running (Alg. 2 L12 / Alg. 3 L16).
        """
        self.trials += 1
        tr = ContentionTrial(
            self.ctx,
            [(r.job, r.gpus, r.remaining_iterations, r.remaining_s) for r in self.running],
            self.blocked,
        )
        for job in self.jobs:
            rho = self.rho[job.job_id]
            g = self.size[job.job_id]
            select = choose(job)
            while True:
                gpus = select(tr, job, rho, theta) if tr.num_free >= g else None
                if gpus is not None:
                    break
                if not tr.advance():
                    return TrialResult(False, self.horizon)
            tr.start(job, gpus, rho)
        return tr.finish()

    def sjfbco_trial(self, theta: float, kappa: int) -> TrialResult:
        """One (theta_u, kappa) trial of Algorithm 1 (FA-FFP for G_j <= kappa, LBSGF otherwise)."""

        def choose(job: Job) -> Selector:
            if self.size[job.job_id] <= kappa:
                return fa_ffp
            lam = self._lam(job)
            cache: list = []

            def select(tr, j, rho, th):
                if not cache:
                    cache.append(lbsgf_servers(tr, j, lam))  # fixed while j waits (Alg. 3 L13-14)
                return lbsgf(tr, j, rho, th, lam, cache[0])

            return select

        return self.trial(theta, choose)

    # -- searches -------------------------------------------------------------------
    def _bisect(self, evaluate: Callable[[int], tuple[TrialResult | None, int | None]]) -> tuple:
        """Algorithm 1 L5-L30: integer bisection on theta_u in [1, T].

        ``bisection="tightest"`` (default): a feasible budget whose makespan is
        no worse than the best so far (m_theta <= m) is kept and the search moves
        to smaller budgets, so equal makespans lead to the tightest budget
        theta~_u that Lemma 2 / Theorem 5 refer to. ``"listing"``: L25 exactly as
        printed (m_theta < m), under which a tie moves the search to *larger*
        budgets.
        """
        T = self.horizon
        m, best, best_theta, best_kappa = T, None, None, None
        left, right = 1, int(math.floor(T))
        strict = self.bisection == "listing"
        while left <= right:
            theta = (left + right) // 2
            res, kappa = evaluate(theta)
            ok = res is not None and res.feasible and res.makespan < T
            m_theta = res.makespan if ok else T
            if ok and (m_theta < m or (not strict and m_theta <= m)):
                m, best, best_theta, best_kappa = m_theta, res, theta, kappa
                right = theta - 1
            else:
                left = theta + 1
        return m, best, best_theta, best_kappa

    def _kappa_groups(self, kappas: Sequence[int]) -> list[int]:
        """One representative kappa per distinct split {G_j <= kappa} (identical trials)."""
        sizes = sorted({j.gpus for j in self.jobs})
        seen: dict[int, int] = {}
        for k in kappas:
            key = sum(1 for s in sizes if s <= k)
            seen.setdefault(key, k)
        return list(seen.values())

    def plan_sjfbco(self, kappas: Sequence[int] | None = None) -> Plan:
        """Algorithm 1. ``kappas`` defaults to 1..max_j G_j (L8); pass one value to fix kappa."""
        if kappas is None:
            kappas = range(1, max(j.gpus for j in self.jobs) + 1)
        reps = self._kappa_groups(list(kappas)) if self.dedupe_kappa else list(kappas)

        def evaluate(theta: int):
            best, best_k = None, None
            m_theta = self.horizon
            for k in reps:
                res = self.sjfbco_trial(theta, k)
                if res.feasible and res.makespan < m_theta:  # L22
                    m_theta, best, best_k = res.makespan, res, k
            return best, best_k

        return self._to_plan("sjf-bco", *self._bisect(evaluate))

    def plan_baseline(self, rule: str) -> Plan:
        """FF or LS with the bisection on theta_u; RAND with theta_u = T."""
        if rule == "ff":
            sel: Selector = first_fit
        elif rule == "ls":
            sel = list_scheduling
        elif rule == "rand":
            sel = random_pick(np.random.default_rng(self.seed))
            theta = int(math.floor(self.horizon))
            res = self.trial(theta, lambda job: sel)
            ok = res.feasible and res.makespan < self.horizon
            return self._to_plan(rule, res.makespan if ok else self.horizon, res if ok else None,
                                 theta if ok else None, None)
        else:
            raise ValueError(f"unknown rule {rule!r} (known: {', '.join(RULES)})")
        return self._to_plan(rule, *self._bisect(lambda th: (self.trial(th, lambda job: sel), None)))

    def plan(self, rule: str = "sjf-bco", kappas: Sequence[int] | None = None) -> Plan:
        """Search with ``rule`` (``sjf-bco``, ``ff``, ``ls`` or ``rand``)."""
        if rule == "sjf-bco":
            return self.plan_sjfbco(kappas)
        return self.plan_baseline(rule)

    def _to_plan(self, rule, m, res: TrialResult | None, theta, kappa) -> Plan:
        if res is None:
            return Plan(rule, False, self.horizon, self.horizon, trials=self.trials)
        return Plan(rule, True, m, self.horizon, theta, kappa, list(res.order), dict(res.gpus),
                    dict(res.starts), dict(res.finishes), self.trials)


def plan_with_growing_horizon(planner_factory: Callable[[float], SjfbcoPlanner], horizon_s: float,
                              rule: str = "sjf-bco", kappas: Sequence[int] | None = None,
                              max_doublings: int = 20) -> Plan:
    """Plan with T = ``horizon_s``; if no schedule fits within T, double T and retry (impl.).

    Used by the online adapter, where the waiting work may exceed a fixed horizon.
    """
    T = horizon_s
    for _ in range(max_doublings + 1):
        plan = planner_factory(T).plan(rule, kappas)
        if plan.feasible:
            return plan
        T *= 2
    return plan
