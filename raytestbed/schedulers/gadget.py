"""GADGET: online temporally greedy scheduling of ring-all-reduce jobs (GADGET Algorithm 1, §V-B).

Every slot t (a Tick every ``slot_s`` seconds):

1. active set I[t] = arrived jobs with z_{i,t-1} < F_i / l_i (Alg. 1 line 3), where
   l_i = zeta_i (``budget_mode: iterations``; the workload stores F_i in worker-iterations)
   and z_{i,t-1} = x_i / zeta_i with x_i the worker-iterations the job has completed, as the
   backend counts them (``view.iterations_done``). The paper's z counts worker-slots received,
   each worth zeta_i iterations by its model; a backend with realistic timing (a step lost at a
   preemption, traffic) completes fewer, and a z counted from the allocations would retire the
   job with work left, stranding it;
2. ring-size bound q_i = min(N_i, remaining budget, total GPUs); constraint (11) is kept by q_i <= floor(remaining worker-slots), except
   that a remainder below one worker-slot gets one worker for its last, partial
   slot (the backend stops the job when its F_i iterations are done, so the
   budget is never exceeded);
3. incremental utilities pi_{i,kappa} = mu_i(zeta z + zeta kappa) - mu_i(zeta z)
   with mu = sigmoid (experiments), sqrt, log(1+x) or the energy utility
   (:mod:`raytestbed.placement.utility`), progress capped at F_i;
4. the per-slot G-VNE (10) by LP-RS-MDE (Algorithm 2) or another mode of
   :func:`raytestbed.placement.gvne.solve_slot`;
5. the embeddings become this slot's allocation y_is[t]: jobs left out are
   preempted (progress kept), jobs with another size or servers are resized,
   jobs whose per-server counts are unchanged keep their GPUs;
6. z_{i,t} = z_{i,t-1} + sum_s y_is[t] (line 6): measured at the next slot as above
   (``served`` keeps the allocated worker-slots for analysis).

``tie_break`` (default 0: the paper's objective) adds ``tie_break * kappa`` to every
pi_{i,kappa}: with a step-like sigmoid, pi underflows to exactly 0 for jobs far below
lambda3, and the LP would leave GPUs idle rather than give them to such jobs; a
tiny positive value makes the slot problem work-conserving without changing the
order among jobs whose pi are larger. ``envelope`` (default off) computes pi from the
least concave majorant of the sigmoid (:class:`~raytestbed.placement.utility.JobUtility`),
restoring the concavity the analysis assumes. ``tiny_pi`` (default ``"order"``): a job
whose pi is below ``pi_tol`` (1e-6; far below lambda3 or past it, pi is e^-40 .. e^-700
or underflows to exactly 0 in float64) is not handed to the LP, whose tolerances cannot
see it, but gets leftover capacity afterwards in the order of its exact pi, compared by
logarithm (:func:`raytestbed.placement.gvne.fill_by_log_pi`) — what the exact optimum of
(10) does, since the sigmoid is strictly increasing. ``"drop"`` reproduces the float64
reading (jobs whose pi is exactly 0 get nothing; GPUs stay idle and such jobs starve).
Only the raw objective needs this: with ``envelope`` or ``tie_break > 0`` every job's pi is visible.
``max_jobs`` (default 0 = all) bounds the
jobs handed to the solver per slot to those with the largest pi/kappa.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raytestbed.core.job import Job
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.placement.gvne import SlotJob, fill_by_log_pi, solve_slot
from raytestbed.placement.ring_embedding import RingEmbedding, Substrate
from raytestbed.placement.utility import UTILITIES, JobUtility, job_utility
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.ring_base import SlottedRingPolicy, job_b, job_mem

MODES = ("lp_rs_mde", "exact", "greedy")
TINY_PI = ("order", "drop")


@register_policy
class GadgetPolicy(SlottedRingPolicy):
    """GADGET (Algorithm 1 + LP-RS-MDE): elastic, preemptive, ring-embedding per slot."""

    name = "gadget"
    description = "GADGET: per-slot temporally greedy utility maximisation with LP-RS-MDE ring embedding (elastic)"

    def __init__(self, seed: int = 0, slot_s: float = 60.0, mode: str = "lp_rs_mde", utility: str = "sigmoid",
                 u_b: int = 50, samples: int = 20, fill: bool = True, tie_break: float = 0.0,
                 max_jobs: int = 0, energy_weight: float = 0.5, exact_time_limit_s: float = 10.0,
                 envelope: bool = False, tiny_pi: str = "order", pi_tol: float = 1e-6) -> None:
        super().__init__(seed, slot_s)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if utility not in UTILITIES:
            raise ValueError(f"utility must be one of {', '.join(UTILITIES)}, got {utility!r}")
        if tiny_pi not in TINY_PI:
            raise ValueError(f"tiny_pi must be one of {', '.join(TINY_PI)}, got {tiny_pi!r}")
        if u_b < 1 or samples < 1 or tie_break < 0 or max_jobs < 0 or pi_tol < 0:
            raise ValueError("u_b and samples must be >= 1, tie_break and max_jobs >= 0")
        self.mode = mode
        self.utility = utility
        self.u_b = int(u_b)
        self.samples = int(samples)
        self.fill = bool(fill)
        self.tie_break = float(tie_break)
        self.max_jobs = int(max_jobs)
        self.energy_weight = float(energy_weight)
        self.exact_time_limit_s = float(exact_time_limit_s)
        self.envelope = bool(envelope)
        self.tiny_pi = tiny_pi
        self.pi_tol = float(pi_tol)
        # the envelope and the tie-break already give every job a visible pi; only the raw objective needs it
        self._order_tiny = tiny_pi == "order" and not self.envelope and self.tie_break == 0.0
        self.rng = np.random.default_rng(seed)
        self._util: dict[int, JobUtility] = {}

    def on_arrival(self, job: Job, view: ClusterView) -> None:
        missing = [k for k in ("zeta", "F", "b_bps") if k not in job.extra]
        if missing:
            raise PolicyError(f"gadget: job {job.job_id} lacks {', '.join(missing)} (use the 'gadget' workload)")
        self._util[job.job_id] = job_utility(job, self.utility, self.energy_weight)

    def budget_slots(self, jid: int) -> float:
        """min_r F^r_i / l^r_i in worker-slots."""
        u = self._util[jid]
        return u.budget / u.zeta

    def slot_jobs(self, view: ClusterView) -> list[SlotJob]:
        """Active jobs I[t] with their ring-size candidates and pi (Alg. 1 line 3, §V-C)."""
        total = int(view.cluster.total_gpus)
        out = []
        for jid in sorted(self.arrived):
            job = self.arrived[jid]
            u = self._util[jid]
            z = min(view.iterations_done(jid), u.budget) / u.zeta  # worker-slots' worth of progress
            rem = self.budget_slots(jid) - z
            if rem <= 1e-9:
                continue
            n = int(job.extra.get("N", job.max_workers or job.gpus))
            q = u.slot_ring_sizes(z, min(n, total))
            x = u.zeta * z
            k = np.arange(1, q + 1)
            pi = u.slot_gains(z, q, self.envelope) + self.tie_break * k
            log_pi: tuple[float, ...] = ()
            if self._order_tiny and pi.max() <= self.pi_tol:
                log_pi = tuple(float(v) for v in np.atleast_1d(u.log_gain(x, np.minimum(x + u.zeta * k, u.budget))))
            out.append(SlotJob(jid, tuple(float(p) for p in pi), job_b(job), job_mem(job), log_pi))
        return out

    def decide(self, view: ClusterView) -> dict[int, RingEmbedding]:
        jobs = self.slot_jobs(view)
        active = len(jobs)
        tol = self.pi_tol if self._order_tiny else 0.0
        tiny = [j for j in jobs if j.log_pi]
        jobs = [j for j in jobs if max(j.pi) > tol]
        if self.max_jobs and len(jobs) > self.max_jobs:
            jobs.sort(key=lambda j: (-max(p / (k + 1) for k, p in enumerate(j.pi)), j.job_id))
            jobs = jobs[: self.max_jobs]
        sub = Substrate.full(view.cluster, lost=view.lost_servers)
        kw: dict[str, Any] = {}
        if self.mode == "lp_rs_mde":
            kw = {"u_b": self.u_b, "samples": self.samples, "fill": self.fill}
        elif self.mode == "exact":
            kw = {"time_limit": self.exact_time_limit_s}
        sol = solve_slot(jobs, sub, self.mode, rng=self.rng, **kw)
        n_main = len(sol.embeddings)
        if tiny:
            sol.embeddings = fill_by_log_pi(sol.embeddings, tiny, sub)
        self.slot_log.append({
            "t": view.now, "active": active, "candidates": len(jobs), "embedded": len(sol.embeddings),
            "embedded_by_solver": n_main, "tiny": len(tiny),
            "utility": sol.utility, "lp_bound": sol.lp_bound, "rounding_utility": sol.rounding_utility,
            "clean_roundings": sol.clean_roundings, "fallback": sol.fallback, "wall_s": sol.wall_s,
        })
        return sol.embeddings
