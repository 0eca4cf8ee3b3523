"""The simulated backend of ``raytestbed run/compare --backend sim`` (:class:`raytestbed.core.backend.Backend`).

Runs the trial's jobs in the discrete-event simulator (:class:`~raytestbed.sim.engine.Simulator`) with
the trial's ``timing`` section: ``analytic`` (iteration-time models) or ``flow`` (the flow network).
Its result has the common ``jobs.csv`` columns only, and the GPU seconds held per GPU type.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from raytestbed.core.backend import TrialRun
from raytestbed.core.cluster import Cluster
from raytestbed.core.eventcore import RunResult
from raytestbed.core.gpu_types import GpuSpeeds, transfer_timing_refusal
from raytestbed.core.job import Job
from raytestbed.sim.engine import Simulator
from raytestbed.sim.pipeline_workers import uses_workers


def noise_refusal(timing: Any, jobs: Sequence[Job] | None) -> str | None:
    """Why ``timing.compute_noise`` cannot apply to this trial (None if it can): the noise is drawn on the
    passes of jobs run worker by worker (flow timing, ``schedule: workers`` or ``transfers``), and a job
    timed otherwise would run without it."""
    if timing.mode != "flow" or timing.schedule == "coflows":
        return (f"timing.compute_noise needs timing.mode: flow with schedule: workers or transfers (the trial says "
                f"mode {timing.mode!r}, schedule {timing.schedule!r}): the noise is drawn per pass of a worker")
    for job in jobs or ():
        if not uses_workers(job, rings=timing.schedule == "transfers"):
            how = ("ring all-reduce jobs run worker by worker with schedule: transfers"
                   if timing.schedule == "workers" else "it is timed as coflows")
            return (f"timing.compute_noise: job {job.job_id} ({job.model}, {job.comm.value}) does not run worker by "
                    f"worker, so its passes would have no noise ({how})")
    return None


class SimBackend:
    """The discrete-event simulator as a backend."""

    name = "sim"
    modes = ("analytic", "flow")  #: override the trial's ``timing.mode``
    clock = "simulated"
    progress_step = 50
    reads_jobs = False
    starts_ray = False

    def missing(self) -> str | None:
        return None

    def with_mode(self, trial: Any, mode: str) -> Any:
        return trial.model_copy(update={"timing": trial.timing.model_copy(update={"mode": mode})})

    def refusal(self, trial: Any, network_policies: Sequence[str], jobs: Sequence[Job] | None,
                speeds: GpuSpeeds | None) -> str | None:
        timing = trial.timing
        if network_policies and timing.mode != "flow":
            return (f"network policy {network_policies[0]!r} needs timing.mode: flow (the trial says "
                    f"{timing.mode!r}; the analytic simulator has no flows to set rates or weights on)")
        if timing.compute_noise > 0 and (why := noise_refusal(timing, jobs)) is not None:
            return why
        if timing.mode == "flow":
            return transfer_timing_refusal(jobs, speeds)
        return None

    def session(self, trial: Any, cluster: Cluster) -> contextlib.nullcontext:
        return contextlib.nullcontext()

    def run(self, run: TrialRun) -> RunResult:
        timing = run.trial.timing
        engine = Simulator(run.cluster, run.jobs, run.policy, run.network_policy, mode=timing.mode, model=run.model,
                           iterations_per_coflow=timing.iterations_per_coflow, schedule=timing.schedule,
                           faults=run.faults, until_s=timing.until_s, on_event=run.on_event,
                           on_decisions=run.on_decisions, progress=run.progress, speeds=run.speeds,
                           restore_s=timing.restore_s, fast_forward=timing.fast_forward,
                           compute_noise=timing.compute_noise,
                           noise_seed=(run.seed, timing.compute_noise_seed))
        if run.on_books is not None:
            run.on_books(engine)
        return engine.run()
