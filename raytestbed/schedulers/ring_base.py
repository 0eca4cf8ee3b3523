"""Shared machinery of the slotted ring-all-reduce policies (GADGET and its baselines, GADGET §VI).

Not a policy itself. A :class:`SlottedRingPolicy` decides once per slot (a
:class:`~raytestbed.schedulers.base.Tick` every ``slot_s`` seconds) which jobs run
with how many workers on which servers, as ring embeddings
(:mod:`raytestbed.placement.ring_embedding`); :func:`plan_decisions` turns the
target embeddings into ``Preempt`` / ``Resize`` / ``StartJob`` decisions with
concrete GPU ids, keeping a job's GPUs when its per-server worker counts are
unchanged.

Job parameters come from ``job.extra`` (the ``gadget`` workload): ``b_bps``
(reserved ring bandwidth, bytes/s), ``mem_gb`` (host memory per worker, GB),
``zeta``, ``F`` (budget in worker-iterations), ``N`` (max workers),
``fixed_workers`` (baselines' static worker count). Missing values default to
b = 0, memory = 0 and the job's own GPU count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.placement.ring_embedding import RingEmbedding, Substrate, greedy_ring, make_embedding
from raytestbed.core.events import Decision, Event, JobArrived, JobFailed, JobFinished, Preempt, Resize, StartJob, Tick
from raytestbed.core.policy import Policy


def job_b(job: Job) -> float:
    return float(job.extra.get("b_bps", 0.0))


def job_mem(job: Job) -> float:
    return float(job.extra.get("mem_gb", 0.0))


def current_embedding(view: ClusterView, jid: int) -> RingEmbedding | None:
    """The ring embedding of a running job's current placement."""
    rj = view.running.get(jid)
    if rj is None:
        return None
    return make_embedding(jid, rj.placement.gpus_per_server(view.cluster), view.cluster, job_b(rj.job),
                          job_mem(rj.job))


def plan_decisions(view: ClusterView, targets: dict[int, RingEmbedding]) -> list[Decision]:
    """Decisions that make the running set equal ``targets`` (job id -> embedding).

    Running jobs absent from ``targets`` are preempted; running jobs whose
    per-server counts are unchanged keep their GPUs; other running jobs get a
    ``Resize`` (or, when resizes wait on each other's GPUs, ``Preempt`` + ``StartJob``);
    pending jobs get ``StartJob``. GPUs are taken in ring order, a job's own old GPUs first.
    """
    c = view.cluster
    running = view.running
    keep = set()
    for jid, rj in running.items():
        t = targets.get(jid)
        if t is not None and rj.placement.gpus_per_server(c) == t.counts():
            keep.add(jid)
    pool: dict[int, set[int]] = {}

    def pool_of(m: int) -> set[int]:
        if m not in pool:
            pool[m] = set(view.free_gpus(m))
        return pool[m]

    for jid, rj in running.items():
        if jid not in keep:
            for g in rj.placement.gpus:
                pool_of(c.server_of(g)).add(g)
    change = [jid for jid in sorted(targets) if jid not in keep]
    claimed: dict[int, dict[int, list[int]]] = {}
    for jid in change:  # pass 1: own GPUs
        old = set(running[jid].placement.gpus) if jid in running else set()
        claimed[jid] = {}
        for m, cnt in targets[jid].servers:
            mine = sorted(g for g in pool_of(m) if g in old)[:cnt]
            pool_of(m).difference_update(mine)
            claimed[jid][m] = mine
    assign: dict[int, tuple[int, ...]] = {}
    for jid in change:  # pass 2: the rest
        gpus: list[int] = []
        for m, cnt in targets[jid].servers:
            have = claimed[jid][m]
            more = sorted(pool_of(m))[: cnt - len(have)]
            if len(have) + len(more) < cnt:
                raise PolicyError(f"job {jid}: server {m} has too few GPUs for the planned ring")
            pool_of(m).difference_update(more)
            gpus.extend(have + more)
        assign[jid] = tuple(gpus)
    decisions: list[Decision] = []
    free = {g for m in range(c.num_servers) for g in view.free_gpus(m)} if change else set()
    for jid in sorted(running):
        if jid not in targets:
            decisions.append(Preempt(jid))
            free |= set(running[jid].placement.gpus)
    resizes = [jid for jid in change if jid in running]
    starts = [jid for jid in change if jid not in running]
    while resizes:
        progressed = False
        for jid in list(resizes):
            old = set(running[jid].placement.gpus)
            need = set(assign[jid])
            if need <= free | old:
                decisions.append(Resize(jid, Placement((assign[jid],))))
                free = (free | old) - need
                resizes.remove(jid)
                progressed = True
        if not progressed:  # resizes wait on each other: stop one, start it later
            jid = resizes.pop(0)
            decisions.append(Preempt(jid))
            free |= set(running[jid].placement.gpus)
            starts.append(jid)
    for jid in starts:
        decisions.append(StartJob(jid, Placement((assign[jid],))))
    return decisions


class SlottedRingPolicy(Policy):
    """Base of the slotted ring policies: bookkeeping of arrivals, service and slots.

    Subclasses implement :meth:`decide` (view -> job id -> target embedding for the
    coming slot; running jobs left out are preempted).

    Attributes: ``served[j]`` (worker-slots allocated so far: LAS's attained service; GADGET
    budgets by the iterations the backend reports instead), ``allocations`` (slot, time s, job, workers), ``slot_log`` (per slot:
    active and embedded jobs and solver details).
    """

    role = "placement"

    def __init__(self, seed: int = 0, slot_s: float = 60.0) -> None:
        super().__init__(seed)
        if not slot_s > 0:
            raise ValueError("slot_s must be > 0")
        self.slot_s = float(slot_s)
        self.tick_interval_s = self.slot_s
        self.arrived: dict[int, Job] = {}
        self.served: dict[int, float] = {}
        self.allocations: list[tuple[int, float, int, int]] = []
        self.slot_log: list[dict[str, Any]] = []
        self.slot = 0

    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if isinstance(event, JobArrived):
            job = event.job
            if job.num_stages != 1:
                raise PolicyError(f"{self.name}: job {job.job_id} is not a single-stage (ring-all-reduce) job")
            self.arrived[job.job_id] = job
            self.served.setdefault(job.job_id, 0.0)
            self.on_arrival(job, view)
        elif isinstance(event, JobFinished):
            self.arrived.pop(event.job_id, None)
        elif isinstance(event, JobFailed):
            pass
        elif isinstance(event, Tick):
            targets = self.decide(view)
            decisions = plan_decisions(view, targets)
            for jid, e in targets.items():
                self.served[jid] = self.served.get(jid, 0.0) + e.workers
                self.allocations.append((self.slot, event.time, jid, e.workers))
            self.slot += 1
            return decisions
        return []

    def run_stats(self) -> dict[str, Any]:
        """Summary statistics of the run (added to ``summary.json``): per-slot embedded ratios, averaged.

        ``embedded_ratio``: mean over slots with active jobs of embedded / active jobs (GADGET
        Figs. 5-6); ``embedded_of_candidates``: mean of embedded by the solver / candidate jobs
        (jobs with pi above the tolerance). Empty when the policy logs no slots.
        """
        act = [s["embedded"] / s["active"] for s in self.slot_log if s.get("active")]
        cand = [s.get("embedded_by_solver", s["embedded"]) / s["candidates"] for s in self.slot_log
                if s.get("candidates")]
        out: dict[str, Any] = {}
        if act:
            out["embedded_ratio"] = float(np.mean(act))
        if cand:
            out["embedded_of_candidates"] = float(np.mean(cand))
        return out

    def on_arrival(self, job: Job, view: ClusterView) -> None:
        """Hook for subclasses (e.g. a feasibility check)."""

    def decide(self, view: ClusterView) -> dict[int, RingEmbedding]:
        raise NotImplementedError

    # helpers for the static baselines ------------------------------------
    def substrate(self, view: ClusterView) -> Substrate:
        return Substrate.full(view.cluster, lost=view.lost_servers)

    def check_fits_empty(self, job: Job, workers: int, view: ClusterView) -> None:
        """One-line error if ``workers`` workers of ``job`` cannot form a ring even on an empty cluster."""
        if greedy_ring(job.job_id, workers, job_b(job), self.substrate(view), job_mem(job)) is None:
            raise PolicyError(f"{self.name}: job {job.job_id} ({workers} workers, b = {job_b(job) * 8 / 1e9:.2f} "
                              f"Gbit/s) cannot form a ring on this cluster")
