"""A-SRPT's five baselines (A-SRPT §V-A-1-d), all with Heavy-Edge mapping.

| id | order (ascending) | queue |
|---|---|---|
| ``spjf`` | predicted duration ñ_i alpha~min_i | strict head-of-line |
| ``spwf`` | predicted workload g_i ñ_i alpha~min_i | strict head-of-line |
| ``wcs-duration`` | predicted duration | work-conserving (every job that fits starts) |
| ``wcs-workload`` | predicted workload | work-conserving |
| ``wcs-subtime`` | submission time | work-conserving |

Ties: arrival time, then job id. Predictions are made once, at arrival, by the
same online predictor as A-SRPT (random forest by default, refitted every
``retrain_every`` completions; an unseen group is predicted 0). GPUs come from
the servers with the most free GPUs (consolidating), mapped by Heavy-Edge, no
delay (``servers: most``; the paper does not say how its baselines choose servers).
``servers: asrpt`` is the other reading: A-SRPT's own choice without its delay
(Algorithm 1 L12 / L22): a comm-heavy job (alpha^max / alpha~min >= ``comm_heavy``)
from the servers with the most free GPUs, any other from those with the fewest.
Non-preemptive, gang. Each prediction is kept in ``predictions``
(``jobs.csv``'s ``predicted_iterations``); ``wcs-subtime`` predicts nothing, so its
column stays empty.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from typing import Any

from raytestbed.core.job import CommPattern, Job
from raytestbed.core.state import ClusterView, FreePool
from raytestbed.errors import ConfigError
from raytestbed.placement.select import AsrptEstimator, least_available, most_available
from raytestbed.predict.iterations import DAY_S, OnlinePredictor
from raytestbed.core.events import Decision, Event, JobArrived, JobFailed, JobFinished, StartJob
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.fifo import random_ps_servers


class GpuCountQueue:
    """The waiting jobs in ascending (key, arrival, job id), kept in one heap per GPU count, so that the
    first job that fits in ``n`` free GPUs is found among the heads of the counts <= n instead of by a
    scan of the whole queue (the work-conserving baselines look at every event: a scan made the run
    quadratic in the queue's length)."""

    def __init__(self) -> None:
        self._heaps: dict[int, list[tuple[float, float, int]]] = {}
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def push(self, item: tuple[float, float, int], gpus: int) -> None:
        heapq.heappush(self._heaps.setdefault(gpus, []), item)
        self._len += 1

    def first(self, max_gpus: int | None = None) -> tuple[tuple[float, float, int], int] | None:
        """(the smallest item, its GPU count) among jobs of at most ``max_gpus`` GPUs (None: any), or None."""
        best = None
        for g, h in self._heaps.items():
            if h and (max_gpus is None or g <= max_gpus) and (best is None or h[0] < best[0]):
                best = (h[0], g)
        return best

    def pop(self, gpus: int) -> tuple[float, float, int]:
        """Remove and return the smallest item of GPU count ``gpus``."""
        self._len -= 1
        return heapq.heappop(self._heaps[gpus])


class PredictedQueuePolicy(Policy):
    """A non-preemptive list scheduler over a queue sorted by :meth:`key`.

    Args:
        seed: seeds Heavy-Edge's fallback, the random forest and PS placement.
        predictor: ``rf`` (default), ``mean``, ``median``, ``perfect`` or ``given``.
        retrain_every: refit the predictor every this many completions; None (default): refit
            every ``retrain_every_s`` seconds of trace time.
        retrain_every_s: the refit period when ``retrain_every`` is None, seconds (default one
            day: the paper retrains "hourly/daily", §IV-C-3).
        history: (group, user, iterations) rows fitted before the first job.
        servers: how a job's servers are chosen: ``most`` (default: the most free GPUs first) or
            ``asrpt`` (A-SRPT's L12 / L22 rule without its delay, see the module docstring).
        comm_heavy: with ``servers: asrpt``, A-SRPT's COMM_HEAVY threshold (paper: 1.5).
    """

    #: the readings of the baselines' server choice (``servers``)
    SERVER_CHOICES = ("most", "asrpt")

    role = "placement"
    needs_identical_servers = "A-SRPT's baselines place with A-SRPT's estimates, which use g, the GPUs of every server"
    work_conserving = False
    uses_prediction = True

    def __init__(self, seed: int = 0, predictor: str = "rf", retrain_every: int | None = None,
                 history: Sequence[Sequence[Any]] = (), retrain_every_s: float = DAY_S, servers: str = "most",
                 comm_heavy: float = 1.5) -> None:
        super().__init__(seed)
        if servers not in self.SERVER_CHOICES:
            raise ConfigError(f"policy_params.{self.name}.servers: {servers!r} is not one of "
                              f"{', '.join(self.SERVER_CHOICES)}")
        if not comm_heavy > 0:
            raise ConfigError(f"policy_params.{self.name}.comm_heavy: must be > 0, got {comm_heavy!r}")
        self.servers = servers
        self.comm_heavy = float(comm_heavy)
        self.predictor = OnlinePredictor.for_policy(self.name, predictor, retrain_every, retrain_every_s, seed, history)
        self.predictor_kind = predictor
        self.retrain_every = self.predictor.retrain_every
        self.retrain_every_s = self.predictor.retrain_every_s
        self.history_rows = len(history)  #: rows fitted before the first job
        self._est: AsrptEstimator | None = None
        self._queue = GpuCountQueue()  #: waiting jobs as (key, arrival, job id)
        self._keys: dict[int, float] = {}
        self._jobs: dict[int, Job] = {}
        self._rng = random.Random(seed)
        self.order: list[int] = []  #: job ids in start order
        #: job id -> ñ_i at arrival (Policy.predictions); stays empty when the order uses no prediction
        self.predictions: dict[int, int] = {}

    def key(self, job: Job, n_pred: int, a_min: float) -> float:
        """The sort key of a job (smaller starts first)."""
        raise NotImplementedError

    def run_stats(self) -> dict[str, int]:
        """For ``summary.json``: the predictor's fits (:meth:`OnlinePredictor.stats`), where the order
        uses predictions."""
        return self.predictor.stats() if self.uses_prediction else {}

    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if self._est is None:
            self._est = AsrptEstimator(view.cluster, self.seed)
        if isinstance(event, JobArrived):
            job = event.job
            a_min, _ = self._est.bounds(job)
            n_pred = 0
            if self.uses_prediction:
                n_pred = self.predictions[job.job_id] = self.predictor.predict(job, event.time)
            k = float(self.key(job, n_pred, a_min))
            self._keys[job.job_id] = k
            self._jobs[job.job_id] = job
            self._queue.push((k, job.arrival_s, job.job_id), job.gpus)
        elif isinstance(event, JobFinished):
            job = self._jobs.pop(event.job_id, None)
            self._keys.pop(event.job_id, None)
            if job is not None and self.uses_prediction:
                self.predictor.observe(job, event.iterations, event.time)
        elif isinstance(event, JobFailed):
            job = view.pending[event.job_id]
            self._queue.push((self._keys[job.job_id], job.arrival_s, job.job_id), job.gpus)
        return self._schedule(view)

    def _select(self, job: Job, pool: FreePool) -> list[tuple[int, int]]:
        """(server, GPUs) for ``job`` by the ``servers`` reading."""
        if self.servers == "asrpt" and not self._est.comm_heavy(job, self.comm_heavy):
            return least_available(pool.free_count, job.gpus)
        return most_available(pool.free_count, job.gpus)

    def _schedule(self, view: ClusterView) -> list[Decision]:
        """Start jobs in queue order: a strict queue stops at the first job that does not fit in the free
        GPUs; a work-conserving one skips it and starts every later job that fits (the first job that fits
        in what is left, repeatedly: GPUs only get fewer, so a job skipped once stays skipped)."""
        out: list[Decision] = []
        pool = FreePool(view) if len(self._queue) and view.total_free > 0 else None
        while pool is not None and pool.total_free > 0:
            nxt = self._queue.first(pool.total_free if self.work_conserving else None)
            if nxt is None or nxt[1] > pool.total_free:
                break
            job = view.pending[self._queue.pop(nxt[1])[2]]
            sel = self._select(job, pool)
            ps: list[int] = []
            if job.comm is CommPattern.PS:
                ps = random_ps_servers(job, [m for m, _ in sel], view.cluster.num_servers, self._rng)
            out.append(StartJob(job.job_id, self._est.place(job, pool, sel, ps)))
            self.order.append(job.job_id)
        return out


@register_policy
class SpjfPolicy(PredictedQueuePolicy):
    """Shortest predicted job first, strict head-of-line."""

    name = "spjf"
    description = "shortest predicted job (duration) first, strict queue, Heavy-Edge mapping"

    def key(self, job, n_pred, a_min):
        return n_pred * a_min


@register_policy
class SpwfPolicy(PredictedQueuePolicy):
    """Shortest predicted workload (duration x GPUs) first, strict head-of-line."""

    name = "spwf"
    description = "shortest predicted workload (duration x GPUs) first, strict queue, Heavy-Edge mapping"

    def key(self, job, n_pred, a_min):
        return job.gpus * n_pred * a_min


@register_policy
class WcsDurationPolicy(PredictedQueuePolicy):
    """Work-conserving, ordered by predicted duration."""

    name = "wcs-duration"
    description = "work-conserving, shortest predicted duration first, Heavy-Edge mapping"
    work_conserving = True

    def key(self, job, n_pred, a_min):
        return n_pred * a_min


@register_policy
class WcsWorkloadPolicy(PredictedQueuePolicy):
    """Work-conserving, ordered by predicted workload."""

    name = "wcs-workload"
    description = "work-conserving, smallest predicted workload (duration x GPUs) first, Heavy-Edge mapping"
    work_conserving = True

    def key(self, job, n_pred, a_min):
        return job.gpus * n_pred * a_min


@register_policy
class WcsSubtimePolicy(PredictedQueuePolicy):
    """Work-conserving, ordered by submission time."""

    name = "wcs-subtime"
    description = "work-conserving, earliest submission first, Heavy-Edge mapping"
    work_conserving = True
    uses_prediction = False

    def key(self, job, n_pred, a_min):
        return job.arrival_s
