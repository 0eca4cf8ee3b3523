"""The emulated backend of ``raytestbed run/compare --backend emu`` (:class:`raytestbed.core.backend.Backend`).

:meth:`EmuBackend.run` starts an :class:`~raytestbed.emu.cluster.EmuCluster` for the trial's
cluster and hands the jobs, the policies (unchanged) and the injected faults to its clock actor
(:class:`~raytestbed.emu.scheduler.EmuScheduler` on the virtual clock), which starts and stops
the real job executors as the policies decide. The driver (:class:`EmuDriver`) only follows:
it logs events and decisions as they come, kills the servers that injected faults name, reports
servers found dead, and collects the books at the end.

Times are emulated seconds of the virtual clock. The results are the simulator's job records
(same ``jobs.csv`` columns and ``summary.json`` keys), plus measured per-iteration statistics
(extra ``jobs.csv`` columns, :data:`MEASURED_COLUMNS`), every iteration (``iterations.csv``) and an
``emulation`` section (:meth:`EmuDriver.emulation_info`).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from raytestbed.core.backend import TrialRun
from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.eventcore import RunResult
from raytestbed.core.events import Decision, Event, Fault, JobFinished
from raytestbed.core.gpu_types import GpuSpeeds, transfer_timing_refusal
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.core.profile import ModelProfile, default_profiles
from raytestbed.errors import ConfigError, RaytestbedError
from raytestbed.execution.plan import check_zoo_model, plan_job
from raytestbed.plugins import ship_by_value

#: the measured per-iteration statistics added to ``jobs.csv`` (emulated seconds)
MEASURED_COLUMNS = ["measured_iterations", "measured_iter_mean_s", "measured_iter_p50_s", "measured_compute_mean_s",
                    "measured_comm_mean_s", "measured_start_overhead_s", "skipped_iterations"]
#: what a second run of the same trial gives, per compute mode (``summary.json``'s ``emulation.repeatability``)
REPEATABILITY = {
    "replay": "exact: every run of this trial gives the same per-job times to the last digit, on any host",
    "real": "within real compute's run-to-run noise: passes are charged measured CPU time, so runs differ "
            "(a 3-job trial, 6 runs: total JCT and single jobs within 6 %; docs/benchmarks.md, "
            "'Real-compute repeatability'); this trial's own spread: raytestbed bench emu --trial TRIAL "
            "--repeat 3",
}

#: the columns of ``iterations.csv``, one row per iteration that ran (emulated seconds; ``cpu_s``: CPU seconds;
#: ``charge_ratio``: the workers' charged compute seconds over their profiled ones, 1 in replay)
ITERATION_COLUMNS = ["job_id", "t_s", "iteration", "iter_s", "compute_s", "comm_s", "loss", "cpu_s", "charge_ratio"]


def emulator_missing() -> str | None:
    """None if the emulator's parts are installed, else a one-line reason."""
    for mod, names in (("raytestbed.emu.cluster", ("EmuCluster",)), ("raytestbed.emu.executors", ("start_job",)),
                       ("raytestbed.emu.clock_actor", ("clock_actor_class",))):
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            return f"cannot import {mod} ({e})"
        for n in names:
            if not hasattr(m, n):
                return f"{mod} has no {n}"
    return None


def peak_concurrent(intervals: Sequence[tuple[int, float, float, int]]) -> int:
    """Largest number of GPUs held at once, from (job, start_s, end_s, gpus) intervals."""
    pts = sorted([(s, g) for _, s, e, g in intervals if e > s] + [(e, -g) for _, s, e, g in intervals if e > s],
                 key=lambda x: (x[0], x[1]))
    cur = peak = 0
    for _, d in pts:
        cur += d
        peak = max(peak, cur)
    return peak


def measured_stats(rows: Sequence[tuple], first_start_s: float) -> dict[str, float]:
    """Statistics of one job's measured iterations ``(t, iteration, iter_s, compute_s, comm_s, ...)``, emulated s.

    ``measured_start_overhead_s``: time from the job's first start to the end of its first iteration,
    minus that iteration's own time (0 on the virtual clock: launching costs wall time only).
    """
    nan = math.nan
    if not rows:
        return {"measured_iterations": 0, "measured_iter_mean_s": nan, "measured_iter_p50_s": nan,
                "measured_compute_mean_s": nan, "measured_comm_mean_s": nan, "measured_start_overhead_s": nan}
    a = np.asarray([r[2:5] for r in rows], dtype=float)
    return {"measured_iterations": len(rows), "measured_iter_mean_s": float(a[:, 0].mean()),
            "measured_iter_p50_s": float(np.median(a[:, 0])), "measured_compute_mean_s": float(a[:, 1].mean()),
            "measured_comm_mean_s": float(a[:, 2].mean()),
            "measured_start_overhead_s": max(0.0, float(rows[0][0] - rows[0][2] - first_start_s))}


class EmuDriver:
    """Drive one trial on an emulated cluster (see the module docstring).

    Args:
        emu: an EmuCluster (``cluster``, ``clock``, ``kill_server``, ``poll_failures``).
        jobs: the jobs.
        policies: placement policy, optionally followed by a network policy.
        faults: faults to inject (emulated seconds).
        compute: executor mode, ``replay`` or ``real``.
        compute_factor: real mode: emulated GPU seconds per CPU second (None: profiled time x recent / typical CPU time).
        device: real mode: where stages compute and how a pass is timed (``cpu``, ``cuda``, ``auto``).
        poll_s: wall seconds between the driver's polls of the clock actor.
        speeds: the trial's per-type speeds (what policies read; each worker computes at its GPU type's
            factor); None: the cluster's ``gpu_speed`` factors.
        restore_s: seconds a restarted job restores its checkpoint before its run starts.
        on_event / on_decisions / progress: the simulator's callbacks (``raytestbed.trial``).
    """

    def __init__(self, emu, jobs: Sequence[Job], policies: Sequence[Policy], faults: Sequence[Fault] = (),
                 compute: str = "replay", compute_factor: float | None = None, poll_s: float = 1.0,
                 device: str = "cpu", speeds: GpuSpeeds | None = None, restore_s: float = 0.0,
                 profiles: Mapping[str, ModelProfile] | None = None,
                 on_event: Callable[[Event], None] | None = None,
                 on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.emu = emu
        self.cluster: Cluster = emu.cluster
        self.jobs = list(jobs)
        self.policies = list(policies)
        self.faults = list(faults)
        self.compute = compute
        self.compute_factor = compute_factor
        self.device = device
        self.speeds = speeds
        self.restore_s = restore_s
        # real compute: the trial's profile of each job's model (what its stages' layer ranges come from)
        self.profiles = None if profiles is None else {j.model: profiles[j.model] for j in self.jobs
                                                       if j.model in profiles}
        self.poll_s = poll_s
        self._on_event = on_event
        self._on_decisions = on_decisions
        self._progress = progress
        self.records: dict[int, JobRecord] = {j.job_id: JobRecord(j) for j in jobs}
        self.busy: list[tuple[int, float, float, int]] = []
        self.measured: dict[int, list[tuple]] = {}
        self.skipped: dict[int, int] = {}
        self.clock_stats: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.wall_s = math.nan
        self.end_time_s = 0.0

    def run(self) -> RunResult:
        try:
            return self._run()
        except Exception as e:  # a user error raised in the clock actor (a bad decision): its own message
            cause = getattr(e, "cause", None)
            if isinstance(cause, RaytestbedError):
                raise cause from None
            raise

    def _run(self) -> RunResult:
        import ray  # imported when the emulator runs: Ray imports in 3.8 s (python -X importtime, load 20)


        clock = self.emu.clock
        finished = 0
        t0 = time.perf_counter()
        ray.get(clock.begin_trial.remote(self.jobs, self.policies, self.faults, self.compute, self.compute_factor,
                                          self.device, self.speeds, self.restore_s, self.profiles))
        while True:
            batch = ray.get(clock.poll.remote(self.poll_s))
            for m in batch.kills:
                self.emu.kill_server(m)
            for m in self.emu.poll_failures():
                ray.get(clock.lose_server.remote(m))
            self.records.update(batch.records)
            for jid, (rows, skipped) in batch.measured.items():  # a finished job's measured iterations
                self.measured[jid], self.skipped[jid] = rows, skipped
            for ev in batch.events:
                if self._on_event is not None:
                    self._on_event(ev)
                if isinstance(ev, JobFinished):
                    finished += 1
                    if self._progress is not None:
                        self._progress(finished, len(self.jobs))
            if self._on_decisions is not None:
                for ev, name, dt, ds in batch.decisions:
                    self._on_decisions(ev, name, dt, ds)
            if batch.done:
                break
        final = ray.get(clock.result.remote())
        self.wall_s = time.perf_counter() - t0
        self.records.update(final["records"])
        self.busy = final["busy"]
        self.measured = final["measured"]
        self.skipped = final["skipped"]
        self.clock_stats = final["stats"]
        self.warnings += final["warnings"]
        self.end_time_s = final["end_time_s"]
        return RunResult(records=[self.records[j] for j in sorted(self.records)],
                         decision_times_s=final["decision_times"], events=final["events"],
                         end_time_s=self.end_time_s, busy_gpu_intervals=list(self.busy),
                         iterations_done=final["iterations_done"])

    # ------------------------------------------------------------------ results
    def measured_stats(self, jid: int) -> dict[str, float]:
        """Measured iteration statistics of a job (emulated seconds; NaN if it never ran)."""
        out = measured_stats(self.measured.get(jid) or [], self.records[jid].first_start_s)
        out["skipped_iterations"] = int(self.skipped.get(jid, 0))
        return out

    def job_extra(self, jid: int) -> dict[str, float]:
        """Journaled with a finished job (restored on resume)."""
        return self.measured_stats(jid)

    def iteration_rows(self) -> list[dict[str, Any]]:
        """Every iteration that ran: the :data:`ITERATION_COLUMNS`."""
        rows = []
        for jid in sorted(self.measured):
            for t, it, s, c, m, loss, cpu, ratio in self.measured[jid]:
                rows.append({"job_id": jid, "t_s": t, "iteration": it, "iter_s": s, "compute_s": c, "comm_s": m,
                             "loss": math.nan if loss is None else loss, "cpu_s": cpu, "charge_ratio": ratio})
        return rows

    def emulation_info(self) -> dict[str, Any]:
        """The ``emulation`` section of ``summary.json``."""
        real_its = sum(len(v) for v in self.measured.values())
        skipped = int(sum(self.skipped.values()))
        st = self.clock_stats
        return {
            "clock": "virtual",
            "compute": self.compute,
            "compute_factor": self.compute_factor if self.compute_factor is not None else "profile-scaled",
            "compute_device": self.device,
            "nic_share": getattr(self.emu, "nic_share", "fair"),
            "workers": getattr(self.emu, "workers", "pool"),
            "servers": self.cluster.num_servers,
            "emulated_gpus": self.cluster.total_gpus,
            "host_cpus": os.cpu_count() or 1,
            "peak_busy_gpus": peak_concurrent(self.busy),
            "emulated_s": self.end_time_s,
            "wall_s": self.wall_s,
            "emulated_s_per_wall_s": (self.end_time_s / self.wall_s) if self.wall_s > 0 else math.nan,
            "iterations_run": real_its,
            "iterations_fast_forwarded": skipped,
            "fast_forward": bool(getattr(self.emu, "fast_forward", None) is None
                                 or self.emu.fast_forward.enabled),
            "pace": getattr(self.emu, "pace", None),
            "ff_windows": st.get("ff_windows", 0),
            "ff_windows_cut": st.get("ff_windows_cut", 0),
            "clock_rounds": st.get("rounds", 0),
            "late_steps": st.get("late_steps", 0),
            "stalls": st.get("stalls", [])[:20],
            "warnings": self.warnings[:50],
            "repeatability": REPEATABILITY[self.compute],
        }


def gpus_per_actor(cfg, cluster: Cluster) -> int:
    """GPUs per worker-pool host process for a trial's ``emu`` settings: as set, else a whole server
    for replay (its workers' steps and in-server messages stay in one process) and one GPU for real
    compute (each worker's passes in a process of its own)."""
    if cfg.gpus_per_actor is not None:
        return int(cfg.gpus_per_actor)
    if cfg.compute == "replay":
        return max((s.gpus for s in cluster.servers), default=1)
    return 1


def worker_layout(cfg) -> str:
    """Where a trial's runs' participants live (``emu.workers``): as set, else (``auto``) in the clock
    actor's process for replay (nothing computes there, so a process per GPU group would only add Ray
    messages: the same results in a fraction of the wall time, docs/benchmarks.md) and in the worker
    pool for real compute (each worker's passes in a process of its own)."""
    if cfg.workers != "auto":
        return cfg.workers
    return "clock" if cfg.compute == "replay" else "pool"


def check_real_compute(cluster: Cluster, jobs: Sequence[Job],
                       profiles: Mapping[str, ModelProfile] | None = None) -> None:
    """Refuse, before anything starts, jobs that real compute cannot run (a model outside the zoo, no
    profile, stages matching no layer range): one line naming the job. ``profiles``: the trial's
    (default: the shipped ones)."""
    profiles = default_profiles() if profiles is None else profiles
    for job in jobs:
        gpus = tuple(range(sum(job.replicas())))
        if len(gpus) > cluster.total_gpus:
            continue  # refused elsewhere
        it = iter(gpus)
        placement = Placement(tuple(tuple(next(it) for _ in range(k)) for k in job.replicas()),
                              ps_servers=tuple(m % cluster.num_servers for m in range(job.num_ps)))
        try:
            plan_job(job, placement, cluster, iterations=1, mode="real", profile=profiles.get(job.model))
        except ConfigError as e:
            raise ConfigError(f"emu.compute real: {e}") from None


def _traffic_text(job: Job) -> str:
    """What of a job's explicit traffic the emulator cannot run ("" if nothing)."""
    t = job.traffic
    parts = (["explicit coflows"] if t.coflows else []) + (["an explicit compute time"] if t.compute_s is not None else []) \
        + (["random PS flow sizes U(0, L]"] if t.max_flow_bytes is not None else [])
    return " and ".join(parts)


class EmuBackend:
    """The emulated cluster as a backend: the trial's ``emu`` section says how (compute, fast-forward, Ray)."""

    name = "emu"
    modes = ("replay", "real")  #: override the trial's ``emu.compute``
    clock = "emulated"
    progress_step = 1
    reads_jobs = True
    starts_ray = True

    def missing(self) -> str | None:
        missing = emulator_missing()
        return f"the emulator is not available: {missing}" if missing else None

    def with_mode(self, trial: Any, mode: str) -> Any:
        return trial.model_copy(update={"emu": trial.emu.model_copy(update={"compute": mode})})

    def refusal(self, trial: Any, network_policies: Sequence[str], jobs: Sequence[Job] | None,
                speeds: GpuSpeeds | None) -> str | None:
        for j in jobs or ():
            if j.traffic is not None and (text := _traffic_text(j)):
                return (f"backend emu: job {j.job_id} gives {text} (workload {trial.workload.kind!r}); the emulator's "
                        f"workers move and compute what their profiles say, so it cannot run this job: use "
                        f"--backend sim:flow")
        if (why := transfer_timing_refusal(jobs, speeds)) is not None:
            return f"backend emu: {why}"
        if (why := trial.emu.workers_conflict()) is not None:  # emu:real over a trial's replay skips the check
            return f"backend emu:real: emu.{why}"
        if trial.emu.compute == "real":
            for j in jobs or ():
                try:
                    check_zoo_model(j)  # before any backend runs (the run itself checks the whole plan)
                except ConfigError as e:
                    return f"backend emu:real: {e} (workload {trial.workload.kind!r})"
        if trial.timing.until_s is not None:
            return ("timing.until_s: only the sim backend stops at a horizon (the emulator runs every job "
                    "to its end)")
        if trial.timing.compute_noise > 0:
            return ("timing.compute_noise: only the sim backend draws compute noise (the emulator's replay charges "
                    "the profile exactly; its real compute has its own jitter)")
        return None

    @contextlib.contextmanager
    def session(self, trial: Any, cluster: Cluster) -> Iterator[None]:
        """One Ray session for several runs (a comparison's policies): each run's :class:`EmuCluster` finds
        Ray connected and starts only its own actors, instead of starting and stopping Ray (~15 s on a
        quiet 2-core host) once per run. Each run's actors and placement groups still go with it."""
        from raytestbed.emu.cluster import open_ray  # the emulator's Ray side: only when an emulated comparison runs

        session = open_ray(cluster, address=trial.emu.address, start_timeout_s=trial.emu.start_timeout_s)
        try:
            yield
        finally:
            session.close()

    def run(self, run: TrialRun) -> RunResult:
        """Run the trial on an emulated cluster started for it (and stopped after)."""
        # the emulator's Ray side, imported when a run needs it: these two modules add 1.0 s cumulative
        # (python -X importtime, 2-core host at load 20) to every simulated run otherwise
        from raytestbed.emu.fastforward import FastForward
        from raytestbed.emu.cluster import EmuCluster

        cfg = run.trial.emu
        policies = run.policies
        ship_by_value(policies)
        profiles = dict(run.profiles) if run.profiles is not None else default_profiles()
        if cfg.compute == "real":
            check_real_compute(run.cluster, run.jobs, profiles)
        ff = FastForward(**cfg.fast_forward.model_dump())
        with EmuCluster(run.cluster, address=cfg.address, nic_share=cfg.nic_share, fast_forward=ff, pace=cfg.pace,
                        gpus_per_actor=gpus_per_actor(cfg, run.cluster), replay_payload_bytes=cfg.replay_payload_bytes,
                        start_timeout_s=cfg.start_timeout_s, workers=worker_layout(cfg)) as emu:
            emu.fast_forward = ff
            if cfg.compute == "real":
                emu.pool.preload_real_compute()  # torch in every GPU host, before the trial
            driver = EmuDriver(emu, run.jobs, policies, run.faults, compute=cfg.compute,
                               compute_factor=cfg.compute_factor, device=cfg.compute_device, poll_s=cfg.progress_s,
                               speeds=run.speeds, restore_s=run.trial.timing.restore_s, profiles=profiles,
                               on_event=run.on_event,
                               on_decisions=run.on_decisions, progress=run.progress)
            if run.on_books is not None:
                run.on_books(driver)
            res = driver.run()
            res.job_columns = list(MEASURED_COLUMNS)
            res.job_extra = {jid: driver.measured_stats(jid) for jid in driver.records}
            res.files = {"iterations.csv": (list(ITERATION_COLUMNS), driver.iteration_rows())}
            res.summary = {"timing": "measured", "timing_model": "measured", "emulation": driver.emulation_info()}
            res.deterministic = cfg.compute != "real"
            return res
