"""SJF-BCO (Yu et al., MobiHoc'22): plan with Algorithm 1, execute the plan as a gang dispatch list.

The paper is offline: every job waits at t = 0 [SB §4.1]. The adapter
(impl.) re-plans whenever new jobs have arrived — batched per
``replan_interval_s`` tick, so the t = 0 batch of the offline setting is planned
once, with all jobs — over the jobs that have not started yet, treating running
jobs' GPUs as busy until their estimated completion and initialising U with
their remaining estimated time. The plan becomes a dispatch list: jobs start in
plan order, each as soon as all of its planned GPUs are free (gang,
non-preemptive); a job never overtakes an earlier one. With the simulator's
``sjfbco`` analytic timing (eq. 8, same constants) execution reproduces the
planned start and finish times; under ``flow`` timing the actual times are
whatever the shared links deliver.

The baselines FF, LS and RAND (``ff.py``, ``ls.py``, ``rand.py``) share this
adapter and differ only in the planner rule.

Parameters (``policy_params``): ``horizon_s`` (T, seconds, default 1200
[SB §7-3]), ``kappa`` (fixed threshold; default: search 1..max G_j),
``lam`` (lambda_j of LBSGF, default 1), ``replan_interval_s`` (default 1 s),
eq. (8) constants ``xi1``, ``xi2_s``, ``degradation_alpha``, ``reduction_bps``
(keep them equal to the trial's ``timing.model_params``), ``bisection``
(``tightest`` | ``listing``).
"""

from __future__ import annotations

import math
from typing import ClassVar

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterView
from raytestbed.core.timing import SjfbcoParams
from raytestbed.errors import PolicyError
from raytestbed.placement.sjfbco_plan import Plan, RunningInfo, SjfbcoPlanner, plan_with_growing_horizon
from raytestbed.placement.sjfbco_trial import PlanContext
from raytestbed.core.events import Decision, Event, JobArrived, JobFailed, ServerLost, StartJob, Tick
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import register_policy


class PlanDispatchPolicy(Policy):
    """Shared adapter of SJF-BCO and its baselines: re-plan on arrivals, dispatch the plan in order."""

    rule: ClassVar[str] = ""

    def __init__(
        self,
        seed: int = 0,
        horizon_s: float = 1200.0,
        kappa: int | None = None,
        lam: float = 1.0,
        replan_interval_s: float = 1.0,
        xi1: float = 1.0,
        xi2_s: float = 1e-4,
        degradation_alpha: float = 1.0,
        reduction_bps: float = math.inf,
        bisection: str = "tightest",
    ) -> None:
        super().__init__(seed)
        if not horizon_s >= 1:
            raise PolicyError(f"{self.name}: horizon_s must be >= 1, got {horizon_s}")
        if kappa is not None and kappa < 1:
            raise PolicyError(f"{self.name}: kappa must be >= 1, got {kappa}")
        if not lam >= 1:
            raise PolicyError(f"{self.name}: lam must be >= 1, got {lam}")
        if not replan_interval_s > 0:
            raise PolicyError(f"{self.name}: replan_interval_s must be > 0, got {replan_interval_s}")
        if bisection not in ("tightest", "listing"):
            raise PolicyError(f"{self.name}: bisection must be 'tightest' or 'listing', got {bisection!r}")
        self.horizon_s = float(horizon_s)
        self.kappa = kappa
        self.lam = float(lam)
        self.bisection = bisection
        self.model_params = SjfbcoParams(xi1=xi1, xi2_s=xi2_s, degradation_alpha=degradation_alpha,
                                         reduction_bps=reduction_bps)
        self.tick_interval_s = float(replan_interval_s)
        self._waiting: dict[int, Job] = {}
        self._dirty = False
        self._queue: list[tuple[int, tuple[int, ...]]] = []  # dispatch list: (job id, GPUs)
        self._ctx: PlanContext | None = None
        self.last_plan: Plan | None = None
        self.replans = 0

    # -- events ----------------------------------------------------------------
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if isinstance(event, JobArrived):
            if event.job.num_stages != 1:
                raise PolicyError(f"{self.name}: job {event.job.job_id} has {event.job.num_stages} pipeline stages; "
                                  f"SJF-BCO and its baselines plan single-stage (ring-all-reduce) jobs only: run "
                                  f"them on a workload of RAR jobs (e.g. kind: sjfbco)")
            self._waiting[event.job.job_id] = event.job
            self._dirty = True
        elif isinstance(event, JobFailed):
            self._waiting[event.job_id] = view.pending[event.job_id]
            self._dirty = True
        elif isinstance(event, ServerLost):
            self._dirty = True
        elif isinstance(event, Tick) and self._dirty and self._waiting:
            self._replan(view)
        return self._dispatch(view)

    # -- planning --------------------------------------------------------------
    def _replan(self, view: ClusterView) -> None:
        cluster = view.cluster
        if self._ctx is None or self._ctx.cluster is not cluster:
            self._ctx = PlanContext(cluster, self.model_params)
        running, held = [], set()
        for rj in view.running.values():
            left = max(0.0, rj.job.iterations - rj.iterations_done)
            running.append(RunningInfo(rj.job, rj.placement.gpus, left, left * self._ctx.tau_lo(rj.job)))
            held.update(rj.placement.gpus)
        free = {g for m in range(cluster.num_servers) for g in view.free_gpus(m)}
        blocked = [g for g in range(cluster.total_gpus) if g not in free and g not in held]
        jobs = list(self._waiting.values())

        def factory(T: float) -> SjfbcoPlanner:
            return SjfbcoPlanner(cluster, jobs, self.model_params, T, self.lam, running, blocked,
                                 seed=self.seed + self.replans, bisection=self.bisection, ctx=self._ctx)

        kappas = None if self.kappa is None else [self.kappa]
        plan = plan_with_growing_horizon(factory, self.horizon_s, self.rule, kappas)
        if not plan.feasible:
            raise PolicyError(f"{self.name}: no feasible plan for {len(jobs)} jobs even with a grown horizon")
        self.last_plan = plan
        self.replans += 1
        self._queue = [(jid, tuple(sorted(plan.gpus[jid]))) for jid in plan.order]
        self._dirty = False

    def _dispatch(self, view: ClusterView) -> list[Decision]:
        out: list[Decision] = []
        if not self._queue:
            return out
        cluster = view.cluster
        free: dict[int, set[int]] = {}
        while self._queue:
            jid, gpus = self._queue[0]
            ok = True
            for g in gpus:
                m = cluster.server_of(g)
                if m not in free:
                    free[m] = set(view.free_gpus(m))
                if g not in free[m]:
                    ok = False
                    break
            if not ok:
                break
            for g in gpus:
                free[cluster.server_of(g)].discard(g)
            self._queue.pop(0)
            self._waiting.pop(jid)
            out.append(StartJob(jid, Placement((gpus,))))
        return out


@register_policy
class SjfBcoPolicy(PlanDispatchPolicy):
    """SJF-BCO: smallest job first, bisection on theta_u, kappa loop, FA-FFP / LBSGF."""

    name = "sjf-bco"
    description = "SJF-BCO (MobiHoc'22): smallest job first, balanced contention and overhead, gang plan"
    role = "placement"
    rule = "sjf-bco"
