"""Tiresias' discretised two-dimensional LAS (Gu et al., NSDI 2019, §3.2), ``tiresias``.

A job's *attained service* is GPUs x seconds it has held GPUs (both dimensions of 2D-LAS). Jobs live in
K queues; ``thresholds_gpu_s`` = [Q_1, ..., Q_{K-1}] (GPU-seconds, increasing) put a job with attained
service a in the first queue k with a < Q_k (the last queue when a >= Q_{K-1}): every job starts in the
highest queue and is demoted as it attains service, never promoted (Tiresias' starvation guard,
STARVE_LIMIT, is not modelled). Queues are served strictly in order; inside a queue jobs are ordered by
:meth:`TiresiasPolicy.key` (FIFO by arrival here; the Gittins-index variant orders them by index,
:mod:`raytestbed.schedulers.tiresias_gittins`).

At every arrival, completion and demotion (a ``WakeUp`` at the instant the next running job crosses
its threshold), the policy walks the jobs in that order, gang-admitting every job whose GPUs fit in
what is left of the cluster (later jobs may fill gaps: Tiresias does not block on the head), preempts
the running jobs not admitted and places the newly admitted ones, first fit on the freed and free
GPUs. A preempted job resumes with its progress (and the trial's ``timing.restore_s``).
"""

from __future__ import annotations

from collections.abc import Sequence

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
from raytestbed.schedulers.base import register_policy


@register_policy
class TiresiasPolicy(Policy):
    """Tiresias 2D-LAS: queues by attained GPU-seconds, demotion at thresholds, FIFO in a queue, preemptive.

    Args:
        seed: unused (the policy is deterministic).
        thresholds_gpu_s: queue thresholds Q_1 < ... < Q_{K-1}, GPU-seconds of attained service.
    """

    role = "placement"
    name = "tiresias"

    def __init__(self, seed: int = 0, thresholds_gpu_s: Sequence[float] = (3600.0,)) -> None:
        super().__init__(seed)
        th = [float(x) for x in thresholds_gpu_s]
        if any(not (x > 0) for x in th) or any(b <= a for a, b in zip(th, th[1:])):
            raise ValueError(f"thresholds_gpu_s must be positive and increasing, got {list(thresholds_gpu_s)!r}")
        self.thresholds = th
        self.jobs: dict[int, Job] = {}  #: arrived, unfinished
        self.arrival: dict[int, float] = {}
        self.attained: dict[int, float] = {}  #: GPU-seconds, as of ``_last``
        self._holding: dict[int, int] = {}  #: running job -> GPUs it holds
        self._last = 0.0
        self._wake: float | None = None
        self.demotions = 0

    # ------------------------------------------------------------------ queues
    def queue(self, jid: int) -> int:
        """The queue index (0 = highest) of job ``jid`` for its attained service."""
        a = self.attained[jid]
        for k, q in enumerate(self.thresholds):
            if a < q * (1 - 1e-12):  # a job woken at its crossing counts as crossed despite rounding
                return k
        return len(self.thresholds)

    def key(self, jid: int) -> tuple:
        """Order inside a queue: first come, first served."""
        return (self.arrival[jid], jid)

    def _account(self, now: float) -> None:
        """Add the service of the running jobs since the last call (GPUs held x seconds)."""
        dt = now - self._last
        if dt > 0:
            for jid, g in self._holding.items():
                before = self.queue(jid)
                self.attained[jid] += g * dt
                if self.queue(jid) != before:
                    self.demotions += 1
        self._last = now

    # ------------------------------------------------------------------ events
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        self._account(event.time)
        if isinstance(event, JobArrived):
            jid = event.job.job_id
            self.jobs[jid] = event.job
            self.arrival[jid] = event.time
            self.attained[jid] = 0.0
        elif isinstance(event, JobFinished):
            self.jobs.pop(event.job_id, None)
            self._holding.pop(event.job_id, None)
            self.finished(event.job_id)
            self.attained.pop(event.job_id, None)
            self.arrival.pop(event.job_id, None)
        elif isinstance(event, (JobFailed, ServerLost)):
            self._holding = {j: g for j, g in self._holding.items() if j in view.running}
        elif isinstance(event, Tick):
            if self._wake is None or event.time < self._wake:
                return []  # another policy's tick
            self._wake = None
        else:
            return []
        return self._schedule(view)

    def finished(self, jid: int) -> None:
        """A job finished (its attained service is final): a hook for variants that learn from it."""

    def _schedule(self, view: ClusterView) -> list[Decision]:
        c = view.cluster
        order = sorted(self.jobs, key=lambda j: (self.queue(j), self.key(j)))
        left = c.total_gpus - sum(s.gpus for s in c.servers if s.server_id in view.lost_servers)
        admit = []
        for jid in order:
            if self.jobs[jid].gpus <= left:
                admit.append(jid)
                left -= self.jobs[jid].gpus
        keep = set(admit)
        out: list[Decision] = []
        free = {m: view.free_gpus(m) for m in range(c.num_servers) if m not in view.lost_servers}
        for jid, rj in view.running.items():
            if jid not in keep:
                out.append(Preempt(jid))
                for g in rj.placement.gpus:
                    m = c.server_of(g)
                    if m in free:
                        free[m].append(g)
        for m in free:
            free[m].sort()
        for jid in admit:
            if jid in view.running:
                continue
            job = self.jobs[jid]
            fits = [m for m in free if len(free[m]) >= job.gpus]
            take, need = [], job.gpus
            if fits:
                take = [(fits[0], free[fits[0]][:need])]
            else:
                for m in sorted(free, key=lambda m: (-len(free[m]), m)):
                    n = min(need, len(free[m]))
                    if n:
                        take.append((m, free[m][:n]))
                        need -= n
                    if need == 0:
                        break
            for m, gpus in take:
                free[m] = free[m][len(gpus):]
            out.append(StartJob(jid, Placement.fill_in_order(job, take, [take[0][0]] * job.num_ps)))
        self._holding = {jid: self.jobs[jid].gpus for jid in admit}
        # the next demotion of a job that will be running
        crossings = []
        for jid, g in self._holding.items():
            k = self.queue(jid)
            if k < len(self.thresholds):
                crossings.append(view.now + (self.thresholds[k] - self.attained[jid]) / g)
        if crossings:
            t = min(crossings)
            if self._wake is None or t < self._wake:
                self._wake = t
                out.append(WakeUp(t))
        return out

    def run_stats(self) -> dict[str, float]:
        """Statistics of the run for ``summary.json``: demotions."""
        return {"tiresias_demotions": self.demotions}
