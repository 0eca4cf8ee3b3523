"""A-SRPT and A-SRPT-Perfect (A-SRPT §IV-C, Algorithm 1).

On arrival of job i: ñ_i from the predictor (0 for an unseen group),
alpha~min_i (fewest-servers layout + Heavy-Edge, eq. 7), alpha^max_i, the
comm-heavy flag alpha^max/alpha~min >= COMM_HEAVY (L8), and its virtual size
p~_i = (g_i / G) ñ_i alpha~min_i. A preemptive SRPT schedule of these sizes on one
virtual machine of speed 1 (instance Ã1) runs alongside the real time; each job
that completes there is appended to the FIFO ``pending_queue`` (L2). The real
scheduler looks only at the queue head (L4, no backfilling): if g_i exceeds the
free GPUs of the whole cluster nothing starts (L5/L25); otherwise

* a comm-heavy job takes GPUs from the servers with the **most** free GPUs
  (L9), maps them with Heavy-Edge (L10) and starts if alpha_i / alpha~min_i <=
  COMM_HEAVY (L12); else it waits up to D_i = tau p~_i seconds (L16) for a
  placement with alpha_i < kappa (the alpha of the first attempt, L15/L18) and
  starts when one appears or when the window ends (L20, with the placement
  computed then);
* any other job takes GPUs from the servers with the **fewest** free GPUs
  (L22) and starts at once.

Time is event-driven, not slotted: availability changes only when jobs finish, so
a placement is re-evaluated at every event; the window
(now, now + D_i] is continuous, so D_i = 0 starts at once. The policy asks the
backend for a :class:`WakeUp` at the next virtual completion (when the queue could
act on it) and at the end of a delay window.

``delay_mode``: ``blocking`` (default, the listing read literally: while a job
waits in its window no other job starts) or ``deferred`` (the waiting job is
parked, the queue goes on; parked jobs are re-evaluated first at every event, and
once their window has ended they start as soon as they fit, ahead of the queue).

The job then runs with its *true* n_i; predictions only set the order and delay.

Measured iteration times (``calibrate``, default on): every ``IterationMeasured``
event of a running job gives the ratio of its measured per-iteration time to the
eq. (7) alpha of the placement A-SRPT chose for it (:class:`AlphaCalibration`). A
new arrival's alpha~min and alpha^max (hence its virtual size and delay window) are
multiplied by the median ratio of recent jobs of the same model (of all recent jobs
when none had that model). This is how the emulator's measurements (pipeline fill,
Ray messaging, host load) reach the policy; in the analytic simulator the measured
time *is* eq. (7), the ratio is 1 and nothing changes. Virtual sizes of jobs that
already arrived are not revised (the SRPT instance stays one fixed instance). The
calibration changes durations only: the L12 test alpha_i / alpha~min_i <= COMM_HEAVY
compares two eq. (7) times (the same factor on both sides would cancel), and the L8
flag alpha^max / alpha~min is a ratio of two equally scaled times.
Predictors: :mod:`raytestbed.predict.iterations`, refitted online from
``JobFinished`` daily in trace time (``retrain_every_s``), or every ``retrain_every``
completions when given (``history`` rows, if given, are fitted before the first job).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from raytestbed.core.job import CommPattern, Job
from raytestbed.core.state import ClusterView, FreePool
from raytestbed.errors import ConfigError
from raytestbed.placement.select import AsrptEstimator, least_available, most_available
from raytestbed.predict.iterations import DAY_S, OnlinePredictor
from raytestbed.core.events import (
    Decision,
    Event,
    IterationMeasured,
    JobArrived,
    JobFailed,
    JobFinished,
    StartJob,
    WakeUp,
)
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.fifo import random_ps_servers

_REL_EPS = 1e-9


class VirtualSrpt:
    """Preemptive SRPT on one machine of speed 1: the instance Ã1 (A-SRPT §IV-C-1).

    Jobs are added at their arrival time with their virtual size (seconds);
    :meth:`advance` moves the virtual clock and returns the jobs completed on the
    way, in completion order (ties: arrival time, then job id).
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, float, int]] = []  # (remaining, arrival, job id)

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, job_id: int, size_s: float, arrival_s: float) -> list[int]:
        """Advance to ``arrival_s`` (returning those completions), then add the job."""
        done = self.advance(arrival_s)
        heapq.heappush(self._heap, (max(0.0, float(size_s)), float(arrival_s), int(job_id)))
        return done

    def advance(self, t: float) -> list[int]:
        """Serve the shortest remaining job until time ``t``; completed job ids in order."""
        heap, done = self._heap, []
        tol = _REL_EPS * max(1.0, abs(t))
        while heap:
            rem, arr, jid = heap[0]
            if self.now + rem <= t + tol:
                heapq.heappop(heap)
                self.now += rem
                done.append(jid)
            else:
                if t > self.now:
                    heapq.heapreplace(heap, (rem - (t - self.now), arr, jid))
                break
        self.now = max(self.now, t)
        return done

    def next_completion(self) -> float | None:
        """Virtual completion time of the job in service, or None when idle."""
        return self.now + self._heap[0][0] if self._heap else None


class AlphaCalibration:
    """Measured / modelled per-iteration time ratios, per model name (dimensionless).

    The pools the medians are taken over are kept sorted (``bisect``), so a new arrival's
    factor costs a lookup, not a median per running job.

    Args:
        window: how many recent jobs per model (and overall) the median is taken over.
    """

    def __init__(self, window: int = 32) -> None:
        self.window = window
        self._modelled: dict[int, tuple[str, float]] = {}  # running job -> (model, eq. 7 alpha, s)
        self._live: dict[int, deque[float]] = {}  # running job -> its recent ratios
        self._done: dict[str, deque[float]] = {}  # model -> ratios of finished jobs
        self._done_all: deque[float] = deque(maxlen=window)
        self._live_median: dict[int, float] = {}  # running job with ratios -> their median
        self._pool: dict[str, list[float]] = {}  # model -> sorted(live medians + finished ratios)
        self._pool_all: list[float] = []  # sorted(all live medians + the last finished ratios)

    @staticmethod
    def _remove(pool: list[float], v: float) -> None:
        del pool[bisect_left(pool, v)]

    def started(self, job: Job, alpha_s: float) -> None:
        """``job`` started on a placement whose eq. (7) time is ``alpha_s`` seconds."""
        if alpha_s > 0:
            self._modelled[job.job_id] = (job.model, alpha_s)
            self._live[job.job_id] = deque(maxlen=16)

    def measured(self, job_id: int, seconds: float) -> None:
        """One measured iteration time of a running job, seconds."""
        m = self._modelled.get(job_id)
        if m is not None and seconds > 0 and math.isfinite(seconds):
            ratios = self._live[job_id]
            ratios.append(seconds / m[1])
            pool = self._pool.setdefault(m[0], [])
            old = self._live_median.get(job_id)
            if old is not None:
                self._remove(pool, old)
                self._remove(self._pool_all, old)
            new = self._live_median[job_id] = median(ratios)
            insort(pool, new)
            insort(self._pool_all, new)

    def ended(self, job_id: int) -> None:
        """The job finished or failed: its median ratio joins the model's history."""
        m = self._modelled.pop(job_id, None)
        ratios = self._live.pop(job_id, None)
        live = self._live_median.pop(job_id, None)
        if live is not None:
            self._remove(self._pool[m[0]], live)
            self._remove(self._pool_all, live)
        if m is not None and ratios:
            r = median(ratios)
            done = self._done.setdefault(m[0], deque(maxlen=self.window))
            pool = self._pool.setdefault(m[0], [])
            if len(done) == done.maxlen:
                self._remove(pool, done[0])
            done.append(r)
            insort(pool, r)
            if len(self._done_all) == self._done_all.maxlen:
                self._remove(self._pool_all, self._done_all[0])
            self._done_all.append(r)
            insort(self._pool_all, r)

    def factor(self, job: Job) -> float:
        """Median ratio for ``job``'s model: over its running jobs' medians and its last ``window``
        finished jobs; when there are none, over all running jobs and the last ``window`` finished
        jobs of any model (1.0 before any measurement)."""
        pool = self._pool.get(job.model) or self._pool_all
        n = len(pool)
        if not n:
            return 1.0
        if n % 2:
            return pool[n // 2]
        return (pool[n // 2 - 1] + pool[n // 2]) / 2


@dataclass(slots=True)
class _JobInfo:
    n_pred: int
    a_min: float  #: alpha~min_i times the calibration factor f at arrival, seconds
    a_max: float  #: alpha^max_i times f, seconds
    heavy: bool
    p_virt: float  #: (g_i/G) ñ_i alpha~min_i (calibrated), seconds
    a_min_model: float  #: alpha~min_i of eq. (7), uncalibrated (the L12 test's denominator), seconds


@dataclass(slots=True)
class _Wait:
    job_id: int
    kappa: float  #: alpha of the first attempt (L15)
    deadline: float  #: end of the delay window, seconds


@register_policy
class AsrptPolicy(Policy):
    """A-SRPT: virtual SRPT order, comm-heavy consolidation with a delay window, Heavy-Edge mapping.

    Args:
        seed: seeds Heavy-Edge's random fallback, the random forest and PS placement.
        predictor: ``rf`` (default), ``mean``, ``median``, ``perfect`` or ``given``.
        retrain_every: refit the predictor every this many completions; None (default): refit
            every ``retrain_every_s`` seconds of trace time.
        retrain_every_s: the refit period when ``retrain_every`` is None, seconds (default one
            day: the paper retrains "hourly/daily", §IV-C-3).
        history: (group, user, iterations) rows fitted before the first job.
        tau: delay factor tau (default 1.0; the paper's testbed used 0).
        comm_heavy: COMM_HEAVY threshold (paper: 1.5).
        delay_mode: ``blocking`` (literal listing) or ``deferred``.
        calibrate: scale new arrivals' alpha estimates by measured/modelled ratios
            (:class:`AlphaCalibration`).
    """

    name = "asrpt"
    needs_identical_servers = "A-SRPT's model (eqs. 4-7) and its virtual single machine use g, the GPUs of every server"
    description = "A-SRPT: virtual SRPT order on predicted iterations, comm-aware delay, Heavy-Edge mapping"
    role = "placement"
    fixed_predictor: str | None = None

    def __init__(self, seed: int = 0, predictor: str = "rf", retrain_every: int | None = None,
                 history: Sequence[Sequence[Any]] = (), tau: float = 1.0, comm_heavy: float = 1.5,
                 delay_mode: str = "blocking", calibrate: bool = True, retrain_every_s: float = DAY_S) -> None:
        super().__init__(seed)
        where = f"policy_params.{self.name}"
        if self.fixed_predictor is not None:
            if predictor not in ("rf", self.fixed_predictor):
                raise ConfigError(f"{where}.predictor: {self.name} always uses {self.fixed_predictor!r}")
            predictor = self.fixed_predictor
        if not tau >= 0:
            raise ConfigError(f"{where}.tau: must be >= 0, got {tau!r}")
        if not comm_heavy > 0:
            raise ConfigError(f"{where}.comm_heavy: must be > 0, got {comm_heavy!r}")
        if delay_mode not in ("blocking", "deferred"):
            raise ConfigError(f"{where}.delay_mode: {delay_mode!r} (known: blocking, deferred)")
        self.predictor = OnlinePredictor.for_policy(self.name, predictor, retrain_every, retrain_every_s, seed, history)
        self.predictor_kind = predictor
        self.retrain_every = self.predictor.retrain_every
        self.retrain_every_s = self.predictor.retrain_every_s
        self.tau = float(tau)
        self.comm_heavy = float(comm_heavy)
        self.delay_mode = delay_mode
        self.calibrate = bool(calibrate)
        self.calibration = AlphaCalibration()
        self.history_rows = len(history)  #: rows fitted before the first job
        self._est: AsrptEstimator | None = None
        self._G = 0
        self._virt = VirtualSrpt()
        self._queue: deque[int] = deque()
        self._info: dict[int, _JobInfo] = {}
        self._jobs: dict[int, Job] = {}
        self._wait: _Wait | None = None  # blocking mode
        self._parked: list[_Wait] = []  # deferred mode
        self._wakes: list[float] = []  # heap of requested wake-up times
        self._new_wakes: list[float] = []  # requested during this call
        self._rng = random.Random(seed)
        self.order: list[int] = []  #: job ids in the order they were started (for tests and logs)
        self.predictions: dict[int, int] = {}  #: job id -> ñ_i at arrival (Policy.predictions)
        self.delayed = 0  #: jobs that entered a delay window
        self.heavy_within_bound = 0  #: comm-heavy jobs started at once: their placement within COMM_HEAVY x alpha~min
        self.heavy_no_window = 0  #: comm-heavy jobs started at once on a worse placement: window tau p_virt = 0
        self.released_s: dict[int, float] = {}  #: job id -> when it left Ã1 for pending_queue (L2), s
        self.window_s: dict[int, float] = {}  #: job id -> when it entered a delay window (L16), s

    def run_stats(self) -> dict[str, int]:
        """Statistics of the run for ``summary.json``: of the comm-heavy jobs reaching the queue's head
        (Algorithm 1 L8), those started at once because their placement is within the COMM_HEAVY bound
        (L12-L13), those started at once on a worse one because their delay window tau x p_virt is 0
        (e.g. predicted 0 iterations), and those that entered a window (L16-L20); and the predictor's
        fits (:meth:`OnlinePredictor.stats`)."""
        return {"asrpt_heavy_within_bound": self.heavy_within_bound, "asrpt_heavy_no_window": self.heavy_no_window,
                "asrpt_delayed": self.delayed, **self.predictor.stats()}

    #: per-job columns of ``jobs.csv`` (:meth:`job_stats`)
    JOB_STAT_COLUMNS = ("asrpt_released_s", "asrpt_window_s")

    def job_stats(self) -> tuple[tuple[str, ...], dict[int, dict[str, float]]]:
        """Per job, for ``jobs.csv``: ``asrpt_released_s``, when it completed in the virtual instance Ã1
        and joined ``pending_queue`` (Alg. 1 L2; seconds), and ``asrpt_window_s``, when it entered a
        delay window (L16; empty if it never did). A job's queueing splits into the gate (arrival to
        release) and the real queue (release to start), of which a window's wait is the last part."""
        out = {jid: {"asrpt_released_s": t} for jid, t in self.released_s.items()}
        for jid, t in self.window_s.items():
            out.setdefault(jid, {})["asrpt_window_s"] = t
        return self.JOB_STAT_COLUMNS, out

    # ----------------------------------------------------------------- events
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if self._est is None:
            self._est = AsrptEstimator(view.cluster, self.seed)
            self._G = view.cluster.total_gpus
        now = view.now
        while self._wakes and self._wakes[0] <= now:
            heapq.heappop(self._wakes)
        if isinstance(event, JobArrived):
            self._arrive(event.job, event.time)
        elif isinstance(event, IterationMeasured):
            self.calibration.measured(event.job_id, event.seconds)
            return self._pending_wakes(now)  # nothing to place: availability did not change
        elif isinstance(event, JobFinished):
            self.calibration.ended(event.job_id)
            job = self._jobs.pop(event.job_id, None)
            self._info.pop(event.job_id, None)
            if job is not None:
                self.predictor.observe(job, event.iterations, event.time)
        elif isinstance(event, JobFailed):
            self.calibration.ended(event.job_id)
            if event.job_id in self._info:
                self._queue.appendleft(event.job_id)  # it had been scheduled: back to the head
        return self._schedule(view)

    def _arrive(self, job: Job, t: float) -> None:
        est = self._est
        a_min_model, a_max = est.bounds(job)
        a_min = a_min_model
        if self.calibrate:
            f = self.calibration.factor(job)
            a_min, a_max = a_min * f, a_max * f
        n_pred = self.predictor.predict(job, t)
        self.predictions[job.job_id] = n_pred
        info = _JobInfo(n_pred, a_min, a_max, est.comm_heavy(job, self.comm_heavy),
                        job.gpus / self._G * n_pred * a_min, a_min_model)
        self._info[job.job_id] = info
        self._jobs[job.job_id] = job
        self._release(self._virt.add(job.job_id, info.p_virt, t), t)

    def _release(self, job_ids: list[int], t: float) -> None:
        """Jobs that completed in Ã1 join the real queue ``pending_queue`` at time ``t`` (Alg. 1 L2)."""
        self._queue.extend(job_ids)
        for jid in job_ids:
            self.released_s.setdefault(jid, t)

    # --------------------------------------------------------------- schedule
    def _start(self, job: Job, pool: FreePool, selection) -> StartJob:
        ps: list[int] = []
        if job.comm is CommPattern.PS:
            ps = random_ps_servers(job, [m for m, _ in selection], self._est.cluster.num_servers, self._rng)
        placement = self._est.place(job, pool, selection, ps)
        self.calibration.started(job, self._est.alpha(job, [c for _, c in selection]))
        self.order.append(job.job_id)
        return StartJob(job.job_id, placement)

    def _heavy_try(self, job: Job, pool: FreePool) -> tuple[list[tuple[int, int]], float]:
        sel = most_available(pool.free_count, job.gpus)
        return sel, self._est.alpha(job, [c for _, c in sel])

    def _retry(self, w: _Wait, view: ClusterView, pool: FreePool, out: list[Decision]) -> bool:
        """Re-evaluate a waiting job (L17-L20); True if it started."""
        job = view.pending[w.job_id]
        if job.gpus > pool.total_free:
            return False  # only after a server loss: wait until it fits
        sel, alpha = self._heavy_try(job, pool)
        expired = view.now >= w.deadline - _REL_EPS * max(1.0, w.deadline)
        if alpha < w.kappa or expired:
            out.append(self._start(job, pool, sel))
            return True
        self._wake(w.deadline)
        return False

    def _schedule(self, view: ClusterView) -> list[Decision]:
        now = view.now
        q = self._queue
        done = self._virt.advance(now)
        if done:
            self._release(done, now)
        pending = view.pending
        if self._wait is None and not self._parked and (not q or pending[q[0]].gpus > view.total_free):
            return self._pending_wakes(now)  # nothing waits and the head does not fit (L5): no pool to plan
        out: list[Decision] = []
        pool = FreePool(view)
        if self._wait is not None:
            if not self._retry(self._wait, view, pool, out):
                return out + self._pending_wakes(now)
            self._wait = None
        if self._parked:
            keep = []
            for w in self._parked:
                if not self._retry(w, view, pool, out):
                    keep.append(w)
            self._parked = keep
            if any(now >= w.deadline for w in keep):
                return out + self._pending_wakes(now)  # an expired parked job blocks the queue
        while q:
            jid = q[0]
            job = pending[jid]
            if job.gpus > pool.total_free:  # L5 / L24-25: the head blocks everything behind it
                break
            q.popleft()  # L7
            info = self._info[jid]
            if info.heavy:  # L8
                sel, alpha = self._heavy_try(job, pool)  # L9-L11
                # L12-L13: eq. (7) over eq. (7) -- alpha is uncalibrated, so is the denominator
                # (the calibration factor would cancel: alpha f / (alpha~min f))
                if alpha / info.a_min_model <= self.comm_heavy:
                    self.heavy_within_bound += 1
                    out.append(self._start(job, pool, sel))
                    continue
                window = self.tau * info.p_virt  # L16
                if window <= 0:
                    self.heavy_no_window += 1
                    out.append(self._start(job, pool, sel))
                    continue
                self.delayed += 1
                self.window_s.setdefault(jid, now)
                w = _Wait(jid, alpha, now + window)
                self._wake(w.deadline)
                if self.delay_mode == "blocking":
                    self._wait = w
                    break
                self._parked.append(w)
            else:  # L21-L23
                out.append(self._start(job, pool, least_available(pool.free_count, job.gpus)))
        return out + self._pending_wakes(now)

    # ------------------------------------------------------------------ timers
    def _wake(self, t: float) -> None:
        if t not in self._wakes:
            heapq.heappush(self._wakes, t)
            self._new_wakes.append(t)

    def _pending_wakes(self, now: float) -> list[Decision]:
        """WakeUps to emit: new timers, plus the next virtual completion when the queue could act on it.

        The virtual machine advances only when the policy schedules, so between two schedules (an
        ``IterationMeasured`` from the emulator) its next completion may already lie behind ``now``:
        then the wake-up is ``now`` (the backend rejects one in the past), and the next schedule
        releases the job. In the simulator every schedule runs at the exact completion time, so
        this never changes a result there."""
        if not (self._queue or self._wait is not None):
            t = self._virt.next_completion()
            if t is not None and t > self._virt.now:
                self._wake(max(t, now))
        if not self._new_wakes:
            return []
        out = [WakeUp(t) for t in self._new_wakes]
        self._new_wakes = []
        return out


@register_policy
class AsrptPerfectPolicy(AsrptPolicy):
    """A-SRPT with the true iteration counts (A-SRPT-Perfect, §V-A-2)."""

    name = "asrpt-perfect"
    description = "A-SRPT with perfect iteration predictions (true n_i)"
    fixed_predictor = "perfect"
