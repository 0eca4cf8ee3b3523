"""Start a placed job on the emulated cluster outside a trial and follow it: :func:`start_job` / :class:`JobRun`.

A trial's scheduler starts runs itself (:class:`raytestbed.emu.scheduler.EmuScheduler`); this
is the same path for tests, benchmarks and notebooks: the clock actor plans the run
(:func:`~raytestbed.execution.plan.plan_job`), registers its workers (and PS tasks) as
participants of the virtual clock at the clock's current time, and starts them in the worker
pool's hosts. The clock then advances whenever every participant is blocked.

Each completed iteration is one row ``(t_end, iteration, iter_s, compute_s, comm_s, loss, cpu_s, charge_ratio)``
in emulated seconds: ``iter_s`` is the time between the completions of iterations i-1 and i (the
last worker to finish the mini-batch's backward, gradient synchronisation and step; the first
iteration counts from the run's start, so it includes filling the pipeline); ``compute_s`` /
``comm_s`` the largest compute and communication time of any worker for that mini-batch; ``loss``
the training loss (real compute); ``cpu_s`` the largest CPU seconds of any worker;
``charge_ratio`` the workers' charged compute seconds over their profiled ones (1 in replay).
"""

from __future__ import annotations

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.execution.plan import plan_job


class JobRun:
    """A run started by :func:`start_job` (a handle on the clock actor's run)."""

    def __init__(self, emu, run_id: tuple, job: Job) -> None:
        self.emu = emu
        self.run_id = run_id
        self.job = job
        self.job_id = job.job_id
        self._info: dict | None = None

    def _get(self, ref, timeout: float | None = None):
        import ray

        return ray.get(ref, timeout=timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended (or ``timeout`` wall seconds passed); returns :meth:`done`."""
        import ray

        try:
            self._info = self._get(self.emu.clock.wait_run.remote(self.run_id, timeout), None)
        except ray.exceptions.RayTaskError as e:
            if "TimeoutError" in str(e):
                return False
            raise
        return True

    def done(self) -> bool:
        """True once the run ended (completed, stopped or failed)."""
        return bool(self.info()["ended"])

    def info(self) -> dict:
        """``{"iterations_done", "failure", "ended", "rows", "skipped", "end_s"}`` now."""
        if self._info is not None:
            return self._info
        info = self._get(self.emu.clock.run_info.remote(self.run_id))
        if info["ended"]:
            self._info = info
        return info

    @property
    def iterations_done(self) -> int:
        return int(self.info()["iterations_done"])

    @property
    def failure(self) -> str | None:
        return self.info()["failure"]

    def stop(self) -> int:
        """Preempt now (on the virtual clock): completed iterations count, the one in progress is lost."""
        n = self._get(self.emu.clock.stop_run.remote(self.run_id))
        self._info = None
        return int(n)

    def records(self) -> list[dict]:
        """Per-iteration rows: end_s, iteration, iter_s, compute_s, comm_s (emulated s), loss, cpu_s, charge_ratio."""
        keys = ("end_s", "iteration", "iter_s", "compute_s", "comm_s", "loss", "cpu_s", "charge_ratio")
        return [dict(zip(keys, r)) for r in self.info()["rows"]]

    def losses(self) -> list[float]:
        """Training loss of every iteration that ran (real mode; mean over the whole global batch)."""
        return [r["loss"] for r in self.records() if r["loss"] is not None]


def start_job(emu, job: Job, placement: Placement, *, iterations: int, mode: str = "replay",
              start_iteration: int = 0, compute_factor: float | None = None, profile=None,
              device: str = "cpu") -> JobRun:
    """Start ``job`` on ``placement`` for ``iterations`` iterations now (on the virtual clock).

    Args:
        emu: an :class:`~raytestbed.emu.cluster.EmuCluster`.
        mode: ``replay`` (charge each stage's profiled compute time) or ``real`` (run the zoo
            model's layers and charge their CPU time x the stage's speed factor).
        compute_factor: real mode: emulated GPU seconds per CPU second for every stage (None:
            each pass charged its stage's profiled time x recent / typical CPU time, docs/emulator.md
            "Real compute").
        profile: the job model's per-layer profile (default: the shipped one).
        device: real mode: ``cpu``, ``cuda`` or ``auto`` (:class:`~raytestbed.execution.plan.WorkerSpec`).

    Raises:
        ConfigError: bad mode, a model real mode cannot build, stages that match no layer range.
    """
    import ray

    if profile is None and mode == "real":
        profile = default_profiles().get(job.model)
    plan_job(job, placement, emu.cluster, iterations=iterations, mode=mode, start_iteration=start_iteration,
             profile=profile)  # refuse bad input here, with the one-line error
    run_id = ray.get(emu.clock.start_run.remote(job, placement, iterations, mode, start_iteration, compute_factor,
                                                profile, device))
    return JobRun(emu, run_id, job)
