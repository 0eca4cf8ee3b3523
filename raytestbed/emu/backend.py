"""The emulated backend of ``raytestbed run/compare --backend emu``.

:func:`run_emulated` starts an :class:`~raytestbed.emu.cluster.EmuCluster` for the trial's
cluster, puts the policies (unchanged) into a :class:`~raytestbed.emu.scheduler_actor.SchedulerActor`
and executes the actor's decisions with the real job executors
(:func:`raytestbed.emu.executors.start_job`) and the fabric:

* ``StartJob`` / the start half of ``Resize`` -> ``start_job(emu, job, placement, iterations=
  remaining, start_iteration=done, mode=compute, reporter=scheduler actor)`` (gang: all workers of
  the placement at once);
* ``Preempt`` / the stop half of ``Resize`` / a failed job -> ``JobRun.stop()`` (the job keeps its
  iteration count and restarts from it);
* ``SetFlowWeights`` / ``SetFlowRates`` -> ``fabric.set_weights`` / ``fabric.set_rates``;
* an injected ``kill_server`` fault -> ``EmuCluster.kill_server(m)``.

Times are emulated seconds. The results are the simulator's job records (same ``jobs.csv``
columns and ``summary.json`` keys), plus measured per-iteration times and an ``emulation``
section (:meth:`EmuBackend.emulation_info`).
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
from raytestbed.core.job import Job
from raytestbed.schedulers.base import Decision, Event, JobFinished, Policy
from raytestbed.emu.scheduler_actor import RunReporter, measured_stats
from raytestbed.core.decisions import JobRecord
from raytestbed.core.events import Fault
from raytestbed.sim.engine import SimResult


def emulator_missing() -> str | None:
    """None if the emulator's parts are installed, else a one-line reason."""
    for mod, names in (("raytestbed.emu.cluster", ("EmuCluster",)), ("raytestbed.emu.executors", ("start_job",)),
                       ("raytestbed.emu.scheduler_actor", ("SchedulerActor",))):
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


class EmuBackend:
    """Drive one trial on an emulated cluster (see the module docstring).

    Args:
        emu: an EmuCluster (``cluster``, ``time_scale``, ``fabric``, ``kill_server``).
        jobs: the jobs.
        policies: placement policy, optionally followed by a network policy.
        faults: faults to inject (emulated seconds).
        compute: executor mode, ``replay`` or ``real``.
        poll_s: wall seconds between fabric polls.
        on_event / on_decisions / progress: the simulator's callbacks (``raytestbed.trial``).
        start_job: the executor entry point (default :func:`raytestbed.emu.executors.start_job`;
            tests may pass a fake).
    """

    def __init__(self, emu, jobs: Sequence[Job], policies: Sequence[Policy], faults: Sequence[Fault] = (),
                 compute: str = "replay", poll_s: float = 1.0,
                 on_event: Callable[[Event], None] | None = None,
                 on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None,
                 progress: Callable[[int, int], None] | None = None, start_job=None) -> None:
        self.emu = emu
        self.cluster: Cluster = emu.cluster
        self.jobs = list(jobs)
        self.policies = list(policies)
        self.faults = list(faults)
        self.compute = compute
        self.poll_s = poll_s
        self._on_event = on_event
        self._on_decisions = on_decisions
        self._progress = progress
        if start_job is None:
            from raytestbed.emu.executors import start_job
        self._start_job = start_job
        self.records: dict[int, JobRecord] = {j.job_id: JobRecord(j) for j in jobs}
        self.busy: list[tuple[int, float, float, int]] = []
        self._measured_stats: dict[int, dict[str, float]] = {}
        self.measured: dict[int, list[tuple]] = {}
        self.warnings: list[str] = []
        self.wall_s = math.nan
        self.end_time_s = 0.0
        self._trial_to_fabric_s = 0.0  # add to a trial time (emulated s) to get the fabric's clock
        self.start_failures = 0

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        import ray

        from raytestbed.emu.scheduler_actor import SchedulerActor

        factor = float(self.emu.time_scale.to_emu(1.0))
        ts = self.emu.time_scale
        actor = ray.remote(SchedulerActor).options(num_cpus=0, max_concurrency=1000).remote(
            self.cluster, self.jobs, self.policies, self.faults, factor, self.emu.fabric, self.poll_s,
            fabric_epoch=float(ts.epoch))
        runs: dict[int, Any] = {}
        finished = 0
        t0 = time.perf_counter()
        try:
            epoch = ray.get(actor.start.remote())
            self._trial_to_fabric_s = (epoch - float(ts.epoch)) * factor
            while True:
                batch = ray.get(actor.poll.remote(0.5))
                for a in batch.actions:
                    self._do(a, actor, runs)
                self.records.update(batch.records)
                self.busy.extend(batch.busy)
                self._measured_stats.update(batch.measured)
                for ev in batch.events:
                    if self._on_event is not None:
                        self._on_event(ev)
                    if isinstance(ev, JobFinished):
                        finished += 1
                        runs.pop(ev.job_id, None)
                        if self._progress is not None:
                            self._progress(finished, len(self.jobs))
                if self._on_decisions is not None:
                    for ev, name, dt, ds in batch.decisions:
                        self._on_decisions(ev, name, dt, ds)
                if batch.done:
                    break
            final = ray.get(actor.result.remote())
        finally:
            for run in runs.values():
                try:
                    run.stop()
                except Exception:
                    pass
            try:
                ray.kill(actor)
            except Exception:
                pass
        self.wall_s = time.perf_counter() - t0
        self.records.update(final["records"])
        self.measured = final["measured"]
        self.warnings += final["warnings"]
        self.end_time_s = final["end_time_s"]
        return SimResult(records=[self.records[j] for j in sorted(self.records)],
                         decision_times_s=final["decision_times"], events=final["events"],
                         end_time_s=self.end_time_s, busy_gpu_intervals=list(self.busy))

    def _do(self, a, actor, runs: dict[int, Any]) -> None:
        if a.kind == "start":
            if a.iterations <= 0:
                actor.on_job_done.remote(a.job_id, 0, a.run_id)
                return
            try:
                runs[a.job_id] = self._start_job(self.emu, a.job, a.placement, iterations=a.iterations,
                                                 mode=self.compute, reporter=RunReporter(actor, a.run_id),
                                                 start_iteration=a.start_iteration,
                                                 start_s=a.start_s + self._trial_to_fabric_s)
            except Exception as e:  # e.g. a model real mode cannot build: the job fails, the policy decides
                self.start_failures += 1
                self.warnings.append(f"job {a.job_id}: start failed: {e}")
                actor.on_job_failed.remote(a.job_id, f"start failed: {e}", a.run_id)
        elif a.kind == "stop":
            run = runs.pop(a.job_id, None)
            if run is not None:
                try:
                    run.stop()
                except Exception as e:  # its workers died with a server
                    self.warnings.append(f"job {a.job_id}: stop: {type(e).__name__}: {e}")
        elif a.kind == "kill":
            self.emu.kill_server(a.server)
        elif a.kind == "weights":
            self.emu.fabric.set_weights.remote(a.data)
        elif a.kind == "rates":
            self.emu.fabric.set_rates.remote(a.data)
        else:  # pragma: no cover - SchedulerCore emits only the kinds above
            raise RuntimeError(f"unknown action {a.kind!r}")

    # ------------------------------------------------------------------ results
    def measured_stats(self, jid: int) -> dict[str, float]:
        """Measured iteration statistics of a job (emulated seconds; NaN if it never ran)."""
        if jid in self._measured_stats:
            return self._measured_stats[jid]
        return measured_stats(self.measured.get(jid) or [], self.records[jid].first_start_s)

    def job_extra(self, jid: int) -> dict[str, float]:
        """Journaled with a finished job (restored on resume)."""
        return self.measured_stats(jid)

    def iteration_rows(self) -> list[dict[str, Any]]:
        """Every measured iteration: job_id, t_s (emulated time reported), iteration, iter_s, compute_s, comm_s."""
        rows = []
        for jid in sorted(self.measured):
            for t, it, s, c, m in self.measured[jid]:
                rows.append({"job_id": jid, "t_s": t, "iteration": it, "iter_s": s, "compute_s": c, "comm_s": m})
        return rows

    def emulation_info(self) -> dict[str, Any]:
        """The ``emulation`` section of ``summary.json``."""
        ts = self.emu.time_scale
        cores = os.cpu_count() or 1
        peak = peak_concurrent(self.busy)
        real = self.compute == "real"
        over = [self.measured_stats(j)["measured_start_overhead_s"] for j in self.records]
        over = np.asarray([x for x in over if x == x], dtype=float)
        return {
            "time_scale": float(ts.to_emu(1.0)),
            "tdf": float(ts.to_wall(1.0)),
            "compute": self.compute,
            "fabric": getattr(self.emu, "mode", "paced"),
            "nic_share": getattr(self.emu, "nic_share", "fair"),
            "servers": self.cluster.num_servers,
            "emulated_gpus": self.cluster.total_gpus,
            "host_cpus": cores,
            "peak_busy_gpus": peak,
            # real compute: emulated GPUs computing at once per host core (> 1: compute times inflated)
            "host_oversubscription": (peak / cores) if real else 0.0,
            "oversubscribed": bool(real and peak > cores),
            "emulated_s": self.end_time_s,
            "wall_s": self.wall_s,
            "start_failures": self.start_failures,
            # long-lived worker host actors (docs/emulator.md, "Worker pool"), or per-job actors
            "worker_pool": getattr(self.emu, "pool", None) is not None,
            # emulated seconds from a job's start to its first iteration, less that iteration: worker launch
            # (pool: the set-up RPCs; per-job actors: new worker processes)
            "start_overhead_median_s": float(np.median(over)) if over.size else math.nan,
            "start_overhead_max_s": float(over.max()) if over.size else math.nan,
            "fidelity_warnings": list(getattr(self.emu, "fidelity_warnings", [])),
            "warnings": self.warnings[:50],
        }


def run_emulated(cluster: Cluster, jobs: Sequence[Job], policy: Policy, network_policy: Policy | None, cfg,
                 faults: Sequence[Fault] = (), on_event=None, on_decisions=None, progress=None,
                 on_engine: Callable[[EmuBackend], None] | None = None) -> tuple[SimResult, EmuBackend, dict]:
    """Run ``jobs`` on an emulated ``cluster`` per the trial's ``emu:`` section ``cfg``
    (:class:`raytestbed.config.EmuConfig`); returns (result, backend, emulation section)."""
    from raytestbed.emu.cluster import EmuCluster
    from raytestbed.emu.timescale import suggest_factor

    factor = cfg.time_scale if cfg.time_scale is not None else suggest_factor(cluster)
    policies = [p for p in (policy, network_policy) if p is not None]
    with EmuCluster(cluster, time_scale=factor, address=cfg.address, mode=cfg.fabric,
                    worker_pool=getattr(cfg, "worker_pool", True), nic_share=cfg.nic_share) as emu:
        if emu.pool is not None and cfg.compute == "real":
            emu.pool.preload_real_compute()  # torch in every GPU host, before the trial clock
        backend = EmuBackend(emu, jobs, policies, faults, compute=cfg.compute, poll_s=cfg.progress_s,
                             on_event=on_event, on_decisions=on_decisions, progress=progress)
        if on_engine is not None:
            on_engine(backend)
        res = backend.run()
        return res, backend, backend.emulation_info()
