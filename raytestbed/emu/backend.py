"""The emulated backend of ``raytestbed run/compare --backend emu``.

:func:`run_emulated` starts an :class:`~raytestbed.emu.cluster.EmuCluster` for the trial's
cluster and hands the jobs, the policies (unchanged) and the injected faults to its clock actor
(:class:`~raytestbed.emu.clock_service.EmuScheduler` on the virtual clock), which starts and stops
the real job executors as the policies decide. The driver (:class:`EmuBackend`) only follows:
it logs events and decisions as they come, kills the servers that injected faults name, reports
servers found dead, and collects the books at the end.

Times are emulated seconds of the virtual clock. The results are the simulator's job records
(same ``jobs.csv`` columns and ``summary.json`` keys), plus measured per-iteration times and an
``emulation`` section (:meth:`EmuBackend.emulation_info`).
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.events import Decision, Event, Fault, JobFinished
from raytestbed.core.job import Job
from raytestbed.core.policy import Policy
from raytestbed.errors import ConfigError, RaytestbedError
from raytestbed.core.eventcore import RunResult


def emulator_missing() -> str | None:
    """None if the emulator's parts are installed, else a one-line reason."""
    for mod, names in (("raytestbed.emu.cluster", ("EmuCluster",)), ("raytestbed.emu.executors", ("start_job",)),
                       ("raytestbed.emu.clock_service", ("ClockService",))):
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


class EmuBackend:
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
        on_event / on_decisions / progress: the simulator's callbacks (``raytestbed.trial``).
    """

    def __init__(self, emu, jobs: Sequence[Job], policies: Sequence[Policy], faults: Sequence[Fault] = (),
                 compute: str = "replay", compute_factor: float | None = None, poll_s: float = 1.0,
                 device: str = "cpu",
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
        import ray

        clock = self.emu.clock
        finished = 0
        t0 = time.perf_counter()
        ray.get(clock.begin_trial.remote(self.jobs, self.policies, self.faults, self.compute, self.compute_factor,
                                          self.device))
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
        """Every iteration that ran: job_id, t_s, iteration, iter_s, compute_s, comm_s, loss, cpu_s."""
        rows = []
        for jid in sorted(self.measured):
            for t, it, s, c, m, loss, cpu in self.measured[jid]:
                rows.append({"job_id": jid, "t_s": t, "iteration": it, "iter_s": s, "compute_s": c, "comm_s": m,
                             "loss": math.nan if loss is None else loss, "cpu_s": cpu})
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
        }


def check_real_compute(cluster: Cluster, jobs: Sequence[Job]) -> None:
    """Refuse, before anything starts, jobs that real compute cannot run (a model outside the zoo, no
    profile, stages matching no layer range): one line naming the job."""
    from raytestbed.core.placement import Placement
    from raytestbed.core.profile import default_profiles
    from raytestbed.execution.plan import plan_job

    profiles = default_profiles()
    for job in jobs:
        gpus = tuple(range(sum(job.replicas())))
        if len(gpus) > cluster.total_gpus:
            continue  # refused elsewhere
        it = iter(gpus)
        placement = Placement(tuple(tuple(next(it) for _ in range(k)) for k in job.replicas()))
        try:
            plan_job(job, placement, cluster, iterations=1, mode="real", profile=profiles.get(job.model))
        except ConfigError as e:
            raise ConfigError(f"emu.compute real: {e}") from None


def run_emulated(cluster: Cluster, jobs: Sequence[Job], policy: Policy, network_policy: Policy | None, cfg,
                 faults: Sequence[Fault] = (), on_event=None, on_decisions=None, progress=None,
                 on_engine: Callable[[EmuBackend], None] | None = None) -> tuple[RunResult, EmuBackend, dict]:
    """Run ``jobs`` on an emulated ``cluster`` per the trial's ``emu:`` section ``cfg``
    (:class:`raytestbed.config.EmuConfig`); returns (result, backend, emulation section)."""
    from raytestbed.emu.clock_service import FastForward
    from raytestbed.emu.cluster import EmuCluster

    policies = [p for p in (policy, network_policy) if p is not None]
    if cfg.compute == "real":
        check_real_compute(cluster, jobs)
    ff = FastForward(**cfg.fast_forward.model_dump())
    with EmuCluster(cluster, address=cfg.address, nic_share=cfg.nic_share, fast_forward=ff, pace=cfg.pace,
                    gpus_per_actor=cfg.gpus_per_actor, replay_payload_bytes=cfg.replay_payload_bytes,
                    start_timeout_s=cfg.start_timeout_s) as emu:
        emu.fast_forward = ff
        if cfg.compute == "real":
            emu.pool.preload_real_compute()  # torch in every GPU host, before the trial
        backend = EmuBackend(emu, jobs, policies, faults, compute=cfg.compute, compute_factor=cfg.compute_factor,
                             device=cfg.compute_device,
                             poll_s=cfg.progress_s, on_event=on_event, on_decisions=on_decisions, progress=progress)
        if on_engine is not None:
            on_engine(backend)
        res = backend.run()
        return res, backend, backend.emulation_info()
