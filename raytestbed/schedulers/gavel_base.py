"""Gavel's round-based scheduling mechanism (Narayanan et al., OSDI 2020, §5), shared by its policies.

A Gavel policy computes an *allocation* X: for every active job j and GPU type k, the fraction of time
j should spend on k (:mod:`raytestbed.schedulers.gavel_lp`). Time is cut into rounds of ``round_s``
seconds (Gavel: 6 minutes, 360 s); the policy acts only at round boundaries (a periodic ``Tick``), so a
new job waits for the next round and GPUs freed by a job that finishes mid-round stay idle until then.
At each round:

1. the time each job received on each type in the last round is added to ``time[j][k]`` and to the
   type's total ``worker_time[k]`` (seconds of the job's run, whatever its GPU count, as Gavel counts);
2. when the set of jobs (or of live GPUs) changed and at least ``reset_interval_s`` (Gavel's
   ``minimum_time_between_allocation_resets``, 1,920 s) passed since the last computation, X is computed
   again and these counters restart at ``round_s / 2`` per job and type (Gavel's reset); a job that
   arrived since then is not in X and waits for the next computation (0 = every round with a change);
3. priorities ``p[k][j] = X[j, k] / (time[j][k] / worker_time[k])`` — allocation over the share of
   the type's time received — (``X[j, k] x 1e9`` while that share is 0; 0 where X or the job's
   throughput on k is 0);
4. per type, in the type order (:meth:`GavelRoundPolicy.type_order`: fastest first for the
   heterogeneity-aware policies, shuffled by a generator of its own for the others), jobs in decreasing priority
   (ties: larger X) are taken greedily while the type has GPUs for them; a job runs on one type, and a
   job outside X does not run (Gavel's simulator lets such a job take GPUs in this greedy pass that then
   stay idle; here it takes none);
5. a job scheduled on the type it already runs on keeps its GPUs (Gavel's lease extension); every
   other running job is preempted (``Preempt``), then the newly scheduled jobs are placed on free GPUs
   of their type: the server of that type with the fewest free GPUs that holds the whole job, else
   the servers with the most free GPUs first.

A preempted job resumes with its progress; the trial's ``timing.restore_s`` charges its checkpoint
restore on the new GPUs. Throughputs T[j, k] come from ``view.speeds`` (the throughput table, or the
profile estimate with the cluster's speed factors). Remaining iterations ``job.iterations -
iterations done`` are read by the policies that need them (finish-time fairness, makespan), as Gavel's
do: Gavel's jobs declare their total steps.
"""

from __future__ import annotations

import math
import random
from abc import abstractmethod

import numpy as np

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterView
from raytestbed.core.events import (
    Decision,
    Event,
    JobArrived,
    JobFailed,
    JobFinished,
    Preempt,
    ServerLost,
    StartJob,
    Tick,
    WakeUp,
)
from raytestbed.core.policy import Policy

#: Gavel's round length, seconds
GAVEL_ROUND_S = 360.0
#: Gavel's least time between two allocations (``minimum_time_between_allocation_resets``), seconds
GAVEL_RESET_INTERVAL_S = 1920.0


class GavelRoundPolicy(Policy):
    """Base of Gavel's policies: the round mechanism of the module docstring; a subclass gives
    :meth:`allocation` (and whether it is heterogeneity-aware, ``perf``).

    Args:
        seed: seeds the policy's draws (``random.Random(seed)``) and, apart, the type order of policies
            that are not heterogeneity-aware (``random.Random(seed + 5)``), as Gavel seeds them.
        round_s: round length, seconds.
        reset_interval_s: least time between two allocations, seconds (Gavel's default 1,920).
    """

    role = "placement"
    progress_at_ticks = True  #: remaining iterations are read at each round
    perf = True  #: heterogeneity-aware: types in order of speed; else shuffled each round
    zero_priority_waits = False  #: FIFO: a job with priority 0 is not scheduled even if GPUs are left

    def __init__(self, seed: int = 0, round_s: float = GAVEL_ROUND_S,
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S) -> None:
        super().__init__(seed)
        if not round_s > 0:
            raise ValueError(f"round_s must be > 0 seconds, got {round_s!r}")
        if not reset_interval_s >= 0:
            raise ValueError(f"reset_interval_s must be >= 0 seconds, got {reset_interval_s!r}")
        self.round_s = float(round_s)
        self.reset_interval_s = float(reset_interval_s)
        self._last_reset: float | None = None
        self._last_round: float | None = None
        self._wake_at: float | None = None  #: the round a deferred allocation waits for
        self.tick_interval_s = self.round_s
        self._rng = random.Random(seed)  #: the policy's own draws (Gavel's FIFO: a type per job)
        self._type_shuffler = random.Random(seed + 5)  #: the round's type order (Gavel's worker-type shuffler)
        self.active: dict[int, Job] = {}  #: arrived, unfinished jobs, by id
        self.arrived_s: dict[int, float] = {}
        self.alloc: dict[int, dict[str, float]] = {}  #: X: job -> type -> fraction of time
        self.time: dict[int, dict[str, float]] = {}  #: seconds received per type since the last reset
        self.worker_time: dict[str, float] = {}
        self.scheduled: dict[int, str] = {}  #: job -> type it was given for the current round
        self._round_start = 0.0
        self._changed = True
        self.allocations = 0  #: allocations computed (run statistics)
        self._done: dict[int, float] = {}  #: iterations done when last seen running, by job
        self._speeds = None  #: the ``view.speeds`` the rows below were read from
        self._rows: dict[int, list[float]] = {}  #: job -> iterations/s on each of the cluster's types

    # ------------------------------------------------------------------ the policy's program
    @abstractmethod
    def allocation(self, jobs: list[Job], types: list[str], T: np.ndarray, workers: np.ndarray,
                   view: ClusterView) -> np.ndarray:
        """X (len(jobs) x len(types)): fraction of time of each job on each type. ``T``: iterations/s of
        each job alone on each type; ``workers``: live GPUs per type."""

    def throughputs(self, jobs: list[Job], types: list[str], view: ClusterView) -> np.ndarray:
        """T[j, k]: iterations/s of job j alone on ``job.gpus`` GPUs of type k (``view.speeds``).

        A job's row over the cluster's types is read from ``view.speeds`` once (a job's speed on a type
        does not change during a trial) and kept until the job finishes."""
        sp = view.speeds
        if sp is not self._speeds:
            self._speeds, self._rows = sp, {}
        every = sp.gpu_types
        rows = self._rows
        for j in jobs:
            if j.job_id not in rows:
                rows[j.job_id] = [sp.throughput(j, k) for k in every]
        T = np.array([rows[j.job_id] for j in jobs], dtype=float).reshape(len(jobs), len(every))
        if list(types) == list(every):
            return T
        col = {k: c for c, k in enumerate(every)}
        return T[:, [col[k] for k in types]]

    def remaining(self, job: Job, view: ClusterView) -> float:
        """Iterations job ``job`` has left (Gavel's policies know every job's total steps)."""
        rj = view.running.get(job.job_id)
        done = rj.iterations_done if rj is not None else self._done.get(job.job_id, 0.0)
        return max(float(job.iterations) - done, 1e-9)

    # ------------------------------------------------------------------ events
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if isinstance(event, JobArrived):
            self.active[event.job.job_id] = event.job
            self.arrived_s[event.job.job_id] = event.time
            self._changed = True
        elif isinstance(event, JobFinished):
            self.active.pop(event.job_id, None)
            self._done.pop(event.job_id, None)
            self._rows.pop(event.job_id, None)
            self._changed = True
        elif isinstance(event, (JobFailed, ServerLost)):
            self._changed = True
        elif isinstance(event, Tick):
            return self._round(view)
        return []

    def _live_workers(self, view: ClusterView) -> tuple[list[str], np.ndarray]:
        c = view.cluster
        lost = view.lost_servers
        count: dict[str, int] = {}
        for s in c.servers:
            if s.server_id not in lost:
                count[s.gpu_type] = count.get(s.gpu_type, 0) + s.gpus
        types = [t for t in c.gpu_types if count.get(t, 0) > 0]
        return types, np.array([count[t] for t in types], dtype=float)

    def type_order(self, types: list[str], T: np.ndarray) -> list[str]:
        """The order types are filled in: fastest first (total throughput of the active jobs) for a
        heterogeneity-aware policy, else a seeded shuffle (as Gavel does)."""
        if not self.perf:
            out = list(types)
            self._type_shuffler.shuffle(out)
            return out
        speed = T.sum(axis=0) if T.size else np.zeros(len(types))
        return [types[i] for i in sorted(range(len(types)), key=lambda i: (-speed[i], i))]

    def _round(self, view: ClusterView) -> list[Decision]:
        now = view.now
        if self._last_round == now:
            return []  # a second Tick at this instant (a WakeUp on the round grid): the round is done
        self._last_round = now
        for jid, rj in view.running.items():
            self._done[jid] = rj.iterations_done
        # 1. time received last round
        for jid, k in self.scheduled.items():
            if jid not in self.time:
                continue
            end = view.finished.get(jid, now)
            ran = max(0.0, min(end, now) - self._round_start) if jid in view.running or jid in view.finished else 0.0
            self.time[jid][k] = self.time[jid].get(k, 0.0) + ran
            self.worker_time[k] = self.worker_time.get(k, 0.0) + ran
        self._round_start = now
        for jid in list(self.time):
            if jid not in self.active:
                del self.time[jid]
        jobs = [self.active[j] for j in sorted(self.active)]
        types, workers = self._live_workers(view)
        if not jobs or not types:
            self.scheduled = {}
            return []
        T = self.throughputs(jobs, types, view)
        # 2. a new allocation when the jobs or the GPUs changed, at most every reset_interval_s
        wake: list[Decision] = []
        if self._changed and self._last_reset is not None and now - self._last_reset < self.reset_interval_s:
            # deferred: make sure a round comes then, even if nothing runs meanwhile (ticks would stop)
            due = math.ceil((self._last_reset + self.reset_interval_s) / self.round_s - 1e-9) * self.round_s
            if self._wake_at != due:
                self._wake_at = due
                wake.append(WakeUp(due))
        elif self._changed:
            self._last_reset = now
            X = self.allocation(jobs, types, T, workers, view)
            self.allocations += 1
            self.alloc = {j.job_id: {k: float(X[i, c]) for c, k in enumerate(types)} for i, j in enumerate(jobs)}
            self.time = {j.job_id: {k: self.round_s / 2 for k in types} for j in jobs}
            self.worker_time = {k: self.round_s / 2 * len(jobs) for k in types}
            self._changed = False
        # 3. priorities, 4. greedy choice per type
        idx = {k: c for c, k in enumerate(types)}
        rows = T.tolist()
        entries = []
        for k in self.type_order(types, T):
            per = []
            c = idx[k]
            wt = self.worker_time.get(k, 0.0)
            for i, j in enumerate(jobs):
                jid = j.job_id
                if jid not in self.alloc:
                    continue  # arrived after the allocation: waits for the next one
                x = self.alloc[jid].get(k, 0.0)
                thr = rows[i][c]
                if x <= 0 or thr <= 0:
                    prio = 0.0
                else:
                    frac = self.time[jid].get(k, 0.0) / wt if wt > 0 else 0.0
                    prio = x / frac if frac > 0 else x * 1e9
                per.append((prio, x, -jid, j, k, thr))
            per.sort(reverse=True)  # by (priority, X, -job id): the job ids differ, so the Job is never compared
            entries += per
        left = dict(zip(types, workers.astype(int).tolist()))
        chosen: dict[int, str] = {}
        for prio, x, _, j, k, thr in entries:
            if left[k] == 0 or j.job_id in chosen or thr <= 0:
                continue
            if self.zero_priority_waits and prio <= 0:
                continue
            if j.gpus > left[k]:
                continue
            left[k] -= j.gpus
            chosen[j.job_id] = k
        self.scheduled = chosen
        return wake + self._placements(chosen, view)

    # ------------------------------------------------------------------ 5. placements
    def _placements(self, chosen: dict[int, str], view: ClusterView) -> list[Decision]:
        c = view.cluster
        out: list[Decision] = []
        free = {m: list(view.free_gpus(m)) for m in range(c.num_servers) if m not in view.lost_servers}
        of_type: dict[str, list[int]] = {}  #: live servers of each type, in server order
        for m in free:
            of_type.setdefault(c.servers[m].gpu_type, []).append(m)
        kept: set[int] = set()
        for jid, rj in view.running.items():
            keep = chosen.get(jid)
            if keep is not None and {c.gpu_type_of(g) for g in rj.placement.gpus} == {keep}:
                kept.add(jid)
                continue  # lease extension: same type, same GPUs
            out.append(Preempt(jid))
            for g in rj.placement.gpus:
                m = c.server_of(g)
                if m in free:
                    free[m].append(g)
        for m in free:
            free[m].sort()
        for jid in sorted(chosen, key=lambda j: (-self.active[j].gpus, j)):
            if jid in kept:
                continue
            job = self.active[jid]
            g = job.gpus
            candidates = of_type.get(chosen[jid], ())
            fits = [(n, m) for m in candidates if (n := len(free[m])) >= g]
            if fits:
                m = min(fits)[1]  # the fewest free GPUs that hold the job, then the lowest server id
                take = [(m, free[m][:g])]
            else:
                servers = [m for m in candidates if free[m]]
                take, need = [], g
                for m in sorted(servers, key=lambda m: (-len(free[m]), m)):
                    n = min(need, len(free[m]))
                    take.append((m, free[m][:n]))
                    need -= n
                    if need == 0:
                        break
                if need:
                    continue  # cannot happen: the type's GPU count was checked
            for m, gpus in take:
                free[m] = free[m][len(gpus):]
            ps = [take[0][0]] * job.num_ps
            out.append(StartJob(jid, Placement.fill_in_order(job, take, ps)))
        return out

    def run_stats(self) -> dict[str, float]:
        """Statistics of the run for ``summary.json``: allocations computed."""
        return {"gavel_allocations": self.allocations}
