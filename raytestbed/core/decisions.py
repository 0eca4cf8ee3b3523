"""Checking policy decisions and keeping the GPU books: once, for every backend.

The simulator (:mod:`raytestbed.sim.engine`) and the emulator's scheduler core
(:class:`raytestbed.emu.scheduler.EmuScheduler`) both apply policy decisions
through one :class:`DecisionBook`:

* :meth:`DecisionBook.check` validates a decision against the cluster state and raises
  :class:`~raytestbed.errors.PolicyError` naming the policy and the job (StartJob only for
  a pending job, Preempt/Resize only for a running one, flow weights > 0, flow rates >= 0,
  WakeUp not in the past);
* :meth:`DecisionBook.start`, :meth:`~DecisionBook.stop`, :meth:`~DecisionBook.finish` and
  :meth:`~DecisionBook.kill_server` move a job between pending, running and finished on the
  backend's :class:`~raytestbed.core.state.ClusterState` (free GPUs) and keep its
  :class:`JobRecord` (first start, placement, GPU-seconds, preemptions, failures);
* :meth:`DecisionBook.note_predictions`, called right after a ``JobArrived`` reached every
  policy, copies the iteration count a policy predicted for the job (``Policy.predictions``)
  into its record.

A backend keeps only what is its own: the simulator schedules timing events, the emulator
emits actions for its executors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterState, RunningJob
from raytestbed.core.flows import FlowRates
from raytestbed.core.events import (
    Decision,
    JobFailed,
    Preempt,
    Resize,
    ServerLost,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    WakeUp,
)
from raytestbed.errors import PolicyError

if TYPE_CHECKING:
    from raytestbed.core.policy import Policy

#: a WakeUp this many seconds in the past is still accepted (clock rounding)
WAKEUP_SLACK_S = 1e-9


def job_for_placement(job: Job, placement: Placement, policy: str) -> Job:
    """The job as it runs on ``placement``: an elastic single-stage job takes the placement's worker count.

    Both backends apply this to StartJob and Resize, so GADGET-style elastic starts behave alike.
    Raises :class:`PolicyError` when the count is outside 1..``job.max_workers`` (or the job is not elastic).
    """
    new_workers = len(placement.stage_gpus[0]) if placement.stage_gpus else 0
    if job.num_stages == 1 and new_workers != job.stages[0].replicas:
        if job.max_workers is None or new_workers > job.max_workers or new_workers < 1:
            raise PolicyError(f"{policy}: job {job.job_id} cannot run {new_workers} workers")
        job = job.with_workers(new_workers)
    return job


@dataclass
class JobRecord:
    """Everything recorded about one job (becomes a row of ``jobs.csv``)."""

    job: Job
    first_start_s: float = math.nan
    finish_s: float = math.nan
    placement: str = ""
    servers: int = 0
    iteration_time_s: float = math.nan
    preemptions: int = 0
    failures: int = 0
    gpu_seconds: float = 0.0
    lower_bound_s: float = math.nan  #: flow mode: sum of O3 CCTs of its coflows + compute, seconds
    #: iterations the policy predicted at the job's arrival (``Policy.predictions``); None: no prediction
    predicted_iterations: int | None = None


#: (job id, start s, end s, GPUs) of one closed GPU-holding interval
BusyInterval = tuple[int, float, float, int]


class DecisionBook:
    """Validates decisions and books jobs on and off GPUs for one backend run.

    Args:
        state: the backend's cluster state (its ``now`` is the time of every booking, seconds).
        records: job id -> record of every job of the run; updated in place.
        on_busy: called with every closed GPU-holding interval (job, start s, end s, GPUs).
    """

    def __init__(self, state: ClusterState, records: Mapping[int, JobRecord],
                 on_busy: Callable[[int, float, float, int], None]) -> None:
        self.state = state
        self.records = records
        self._on_busy = on_busy

    # ------------------------------------------------------------ checks
    def check(self, d: Decision, policy: str, known_flow: Callable[[tuple], bool] | None = None) -> Job | None:
        """Raise :class:`PolicyError` if decision ``d`` of ``policy`` cannot be applied now.

        Returns the job to start for ``StartJob`` (the pending job) and ``Resize`` (the running
        job), both sized for the decision's placement (:func:`job_for_placement`); else None.
        ``known_flow``: if given, ``SetFlowRates`` for a flow id it rejects is an error.
        """
        st = self.state
        if isinstance(d, (StartJob, Resize)) and not isinstance(d.placement, Placement):
            raise PolicyError(f"{policy}: the placement of job {d.job_id} is a {type(d.placement).__name__}, "
                              f"not a Placement")
        if isinstance(d, StartJob):
            job = st.pending.get(d.job_id)
            if job is None:
                raise PolicyError(f"{policy}: StartJob for job {d.job_id}, which is not pending")
            return job_for_placement(job, d.placement, policy)
        if isinstance(d, Preempt):
            if d.job_id not in st.running:
                raise PolicyError(f"{policy}: Preempt for job {d.job_id}, which is not running")
            return None
        if isinstance(d, Resize):
            rj = st.running.get(d.job_id)
            if rj is None:
                raise PolicyError(f"{policy}: Resize for job {d.job_id}, which is not running")
            return job_for_placement(rj.job, d.placement, policy)
        if isinstance(d, WakeUp):
            if not d.at_s >= st.now - WAKEUP_SLACK_S:
                raise PolicyError(f"{policy}: WakeUp at {d.at_s} s is in the past (now {st.now} s)")
            return None
        if isinstance(d, SetFlowWeights):
            for jid, w in d.weights.items():
                if not w > 0:
                    raise PolicyError(f"{policy}: weight of job {jid} must be > 0, got {w}")
            return None
        if isinstance(d, SetFlowRates):
            if isinstance(d.rates, FlowRates):  # an array: the backend applies it by flow key
                bad = d.rates.first_bad()
                if bad is not None:
                    raise PolicyError(f"{policy}: rate of flow {d.rates.flows.flow_ids[bad]} must be >= 0")
                return None
            for fid, r in d.rates.items():
                if known_flow is not None and not known_flow(fid):
                    raise PolicyError(f"{policy}: SetFlowRates for unknown flow {fid}")
                if not r >= 0:
                    raise PolicyError(f"{policy}: rate of flow {fid} must be >= 0")
            return None
        raise PolicyError(f"{policy}: unknown decision {d!r}")

    @staticmethod
    def wake_time(d: WakeUp, now: float) -> float:
        """When a checked ``WakeUp`` fires, seconds: its ``at_s``, never before ``now``."""
        return max(d.at_s, now)

    # ------------------------------------------------------------ predictions
    def note_predictions(self, job_id: int, policies: Sequence[Policy]) -> None:
        """Record what the policies predicted for ``job_id`` (call right after its ``JobArrived``).

        The first policy (placement before network) with an entry in ``predictions`` wins; the
        record keeps None when no policy predicted the job.
        """
        for pol in policies:
            n = pol.predictions.get(job_id)
            if n is not None:
                self.records[job_id].predicted_iterations = int(n)
                return

    # ------------------------------------------------------------ GPU books
    def start(self, job: Job, placement: Placement, iterations_done: float) -> RunningJob:
        """Put pending ``job`` on the GPUs of ``placement`` (validated) at ``state.now``; it runs."""
        st = self.state
        now = st.now
        jid = job.job_id
        st.allocate(job, placement)
        del st.pending[jid]
        rec = self.records[jid]
        if math.isnan(rec.first_start_s):
            rec.first_start_s = now
        rec.placement = placement.describe(st.cluster)
        rec.servers = len(placement.servers(st.cluster))
        old = st.running.get(jid)
        rj = st.running[jid] = RunningJob(
            job=job, placement=placement, start_s=now, first_start_s=rec.first_start_s,
            iterations_done=iterations_done, bytes_sent=old.bytes_sent if old else 0.0,
        )
        return rj

    def stop(self, jid: int, count: str | None = None) -> RunningJob:
        """Take running job ``jid`` off its GPUs, keeping its progress; it becomes pending.

        ``count``: ``"preemptions"`` or ``"failures"`` adds one to that counter of its record.
        """
        if count not in (None, "preemptions", "failures"):
            raise ValueError(f"unknown counter {count!r}")
        st = self.state
        rj = st.running.pop(jid)
        self._close_busy(jid, rj)
        st.release(rj.placement)
        st.pending[jid] = rj.job
        if count is not None:
            setattr(self.records[jid], count, getattr(self.records[jid], count) + 1)
        return rj

    def finish(self, jid: int) -> RunningJob:
        """Running job ``jid`` completed at ``state.now``: free its GPUs, record its finish time."""
        st = self.state
        rj = st.running.pop(jid)
        self._close_busy(jid, rj)
        st.release(rj.placement)
        st.finished[jid] = st.now
        self.records[jid].finish_s = st.now
        return rj

    def jobs_on_server(self, server: int) -> list[int]:
        """Running jobs with a GPU or a parameter server on ``server``."""
        cluster = self.state.cluster
        return [jid for jid, rj in self.state.running.items()
                if server in rj.placement.servers(cluster) or server in rj.placement.ps_servers]

    def kill_server(self, server: int, stop: Callable[[int, str], object]) -> list:
        """Lose ``server`` for good at ``state.now``; returns the events to deliver.

        Every running job on it is stopped with ``stop(job_id, "failures")`` (the backend's own
        stop, which must pass both on to :meth:`stop`); the events are ``ServerLost`` and one
        ``JobFailed`` per hit job.
        """
        now = self.state.now
        hit = self.jobs_on_server(server)
        for jid in hit:
            stop(jid, "failures")
        self.state.lose_server(server)
        reason = f"server {server} lost"
        return [ServerLost(now, server, tuple(hit))] + [JobFailed(now, jid, reason) for jid in hit]

    def _close_busy(self, jid: int, rj: RunningJob) -> None:
        n = len(rj.placement.gpus)
        now = self.state.now
        self._on_busy(jid, rj.start_s, now, n)
        self.records[jid].gpu_seconds += n * (now - rj.start_s)
