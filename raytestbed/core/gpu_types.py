"""How fast a job runs on each GPU type: a measured throughput table, or per-type factors.

A cluster names a GPU type per server group (``gpu_type: v100``; :mod:`raytestbed.core.cluster`).
A job's speed on a type comes from, in this order:

1. a **throughput table** (:class:`ThroughputTable`): measured iterations (steps) per second of a
   job type at a scale factor (its GPU count) on a GPU type. The file format is Gavel's
   (``simulation_throughputs.json`` of the Gavel throughput data set)::

       {"v100": {"('ResNet-18 (batch size 16)', 1)": {"null": 32.35, "(other job, 1)": [a, b], ...}, ...},
        "p100": {...}, "k80": {...}}

   The outer key is the GPU type (a cluster's ``gpu_type``), the second the job type and the scale
   factor written as a Python tuple, and ``"null"`` holds the throughput of the job alone (the
   other keys are co-located pairs, not used here). A user adds a type by adding an outer key
   (``"a100": {...}``) with the job types they run. A job uses the table when its ``model`` is a
   job type of the table at its GPU count (``job.gpus``); its time per iteration on a type is
   1 / throughput, communication included, whatever the analytic model says.
2. per-type **speed factors** (``gpu_speed: {k80: 0.3, v100: 1.0}`` in the cluster file): the
   job's profiled compute times (forward and backward of every stage) are divided by the factor
   of its type, then the trial's analytic model prices it as before. Types not listed: 1.

A job placed across types runs at its slowest type's speed (synchronous data-parallel training
waits for its slowest worker): the largest per-iteration time over the types it holds.

Flow timing and the emulator take the speed factors worker by worker: every worker program charges
its passes at the factor of its own GPU's type (:attr:`raytestbed.execution.plan.WorkerSpec.speed`,
:meth:`GpuSpeeds.gpu_factor`), so the slowest type's speed *emerges* where a step waits for every
replica (a ring all-reduce, a pipeline's next stage); jobs timed as coflows compute at each stage's
slowest replica (:meth:`GpuSpeeds.placed_job`). A throughput table gives a job's whole iteration,
communication included, which those timings make from the job's transfers: they refuse a job that
uses it.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job, Stage
from raytestbed.core.placement import Placement
from raytestbed.core.timing import IterationModel


class ThroughputTable:
    """Measured iterations/s per (GPU type, job type, scale factor), a job alone on its GPUs.

    Args:
        rows: GPU type -> {(job type, scale factor): iterations/s}.
        source: where it came from (for messages).
    """

    def __init__(self, rows: Mapping[str, Mapping[tuple[str, int], float]], source: str = "table") -> None:
        self.rows = {t: dict(r) for t, r in rows.items()}
        self.source = source
        self._keys = {k for r in self.rows.values() for k in r}
        for t, r in self.rows.items():
            for k, v in r.items():
                if not (v >= 0 and math.isfinite(v)):
                    raise ValueError(f"{source}: {t} {k}: throughput must be a finite number >= 0, got {v!r}")

    @classmethod
    def from_json(cls, path: str | Path) -> "ThroughputTable":
        """Read Gavel's JSON format (module docstring); ValueError naming the file and key if malformed."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise ValueError(f"{p}: cannot read: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: line {e.lineno}: invalid JSON: {e.msg}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a throughput table is a mapping GPU type -> job keys")
        rows: dict[str, dict[tuple[str, int], float]] = {}
        for gpu_type, jobs in data.items():
            if not isinstance(jobs, dict):
                raise ValueError(f"{p}: {gpu_type}: expected a mapping of job keys")
            out = rows[gpu_type] = {}
            for key, entry in jobs.items():
                try:
                    job_type, scale = ast.literal_eval(key)
                    scale = int(scale)
                except (ValueError, SyntaxError, TypeError):
                    raise ValueError(f"{p}: {gpu_type}: job key {key!r} is not \"('job type', scale_factor)\"") from None
                if not isinstance(entry, dict) or "null" not in entry:
                    raise ValueError(f"{p}: {gpu_type}: {key}: no \"null\" (isolated) throughput")
                v = entry["null"]
                if not isinstance(v, (int, float)):
                    raise ValueError(f"{p}: {gpu_type}: {key}: \"null\" must be a number, got {v!r}")
                out[(str(job_type), scale)] = float(v)
        return cls(rows, str(p))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(self.rows)

    def job_types(self) -> list[str]:
        """Every job type of the table, sorted."""
        return sorted({k[0] for k in self._keys})

    def has(self, job_type: str, scale: int) -> bool:
        """Whether any GPU type has a row for ``(job_type, scale)``."""
        return (job_type, scale) in self._keys

    def get(self, gpu_type: str, job_type: str, scale: int) -> float | None:
        """Iterations/s of ``job_type`` on ``scale`` GPUs of ``gpu_type``; None if the table has no such row."""
        return self.rows.get(gpu_type, {}).get((job_type, scale))


def scaled_stage(stage: Stage, factor: float) -> Stage:
    """A copy of ``stage`` whose compute times (forward, backward) are divided by ``factor``."""
    if factor == 1.0:
        return stage
    return Stage(stage.replicas, replace(stage.profile, fwd_s=stage.profile.fwd_s / factor,
                                         bwd_s=stage.profile.bwd_s / factor))


def scaled_job(job: Job, factor: float) -> Job:
    """A copy of ``job`` whose stage compute times (forward, backward) are divided by ``factor``."""
    if factor == 1.0:
        return job
    return replace(job, stages=tuple(scaled_stage(st, factor) for st in job.stages))


class GpuSpeeds:
    """A job's speed on each GPU type of a cluster (module docstring); what policies read as
    ``view.speeds``.

    Args:
        cluster: the cluster (its types and ``gpu_speed`` factors).
        table: the throughput table, or None.
    """

    def __init__(self, cluster: Cluster, table: ThroughputTable | None = None) -> None:
        self.cluster = cluster
        self.table = table

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return self.cluster.gpu_types

    def uses_table(self, job: Job) -> bool:
        """True when the table gives this job's speed (its model is a job type of the table at ``job.gpus``)."""
        return self.table is not None and self.table.has(job.model, job.gpus)

    @property
    def uniform(self) -> bool:
        """True when every job runs at its profile's speed on every GPU (no table, no factor other than 1)."""
        return self.table is None and all(self.cluster.speed_factor(t) == 1.0 for t in self.gpu_types)

    def factor(self, gpu_type: str) -> float:
        """The compute speed factor of ``gpu_type`` (cluster ``gpu_speed``; 1 if not given)."""
        return self.cluster.speed_factor(gpu_type)

    def throughput(self, job: Job, gpu_type: str) -> float:
        """Iterations/s of ``job`` alone on ``job.gpus`` GPUs of ``gpu_type``.

        From the table when the job uses it (0 when the table has no row for this type: the job
        cannot run there). Otherwise an estimate from the profile: factor / (its slowest stage's
        forward + backward seconds), compute only."""
        if self.uses_table(job):
            v = self.table.get(gpu_type, job.model, job.gpus)
            return 0.0 if v is None else v
        compute = max(st.profile.compute_s for st in job.stages)
        return math.inf if compute <= 0 else self.factor(gpu_type) / compute

    def gpu_factor(self, gpu: int) -> float:
        """The compute speed factor of GPU ``gpu``'s type: its passes take profiled seconds / factor."""
        return self.factor(self.cluster.gpu_type_of(gpu))

    def mixed(self, placement: Placement) -> bool:
        """Whether the GPUs of ``placement`` compute at different speed factors."""
        return len({self.gpu_factor(g) for g in placement.gpus}) > 1

    def placed_job(self, job: Job, placement: Placement) -> Job:
        """``job`` as it computes on ``placement``, for timings that charge a stage's compute once per
        iteration (flow timing's coflows): each stage's forward and backward seconds divided by the
        smallest factor among its replicas' GPUs (the replica a synchronous step waits for), an
        explicit compute time (``job.traffic.compute_s``) by the smallest over the whole placement.
        ``job`` itself when every factor is 1; for a one-stage job the slowest-type rule of
        :class:`TypedModel`."""
        fs = [min(self.gpu_factor(g) for g in gpus) for gpus in placement.stage_gpus]
        if all(f == 1.0 for f in fs):
            return job
        stages = tuple(scaled_stage(st, f) for st, f in zip(job.stages, fs))
        traffic = job.traffic
        if traffic is not None and traffic.compute_s is not None:
            traffic = replace(traffic, compute_s=traffic.compute_s / min(fs))
        return replace(job, stages=stages, traffic=traffic)

    def types_of(self, placement: Placement) -> set[str]:
        """The GPU types a placement holds."""
        c = self.cluster
        return {c.gpu_type_of(g) for g in placement.gpus}

    def slowest_type(self, job: Job, types: Iterable[str]) -> str:
        """The type among ``types`` on which ``job`` is slowest (ties: the first in cluster order)."""
        order = {t: i for i, t in enumerate(self.gpu_types)}
        return min(types, key=lambda t: (self.throughput(job, t), order.get(t, 0)))


def transfer_timing_refusal(jobs: Iterable[Job] | None, speeds: GpuSpeeds | None) -> str | None:
    """Why flow timing and the emulator, which make a job's communication from its transfers, cannot run
    one of ``jobs``: the first whose speed the throughput table gives (its time per iteration includes
    communication). One line, or None."""
    if speeds is None or speeds.table is None:
        return None
    job = next((j for j in jobs or () if speeds.uses_table(j)), None)
    if job is None:
        return None
    return (f"job {job.job_id}: the throughput table {speeds.table.source} gives its whole iteration time "
            f"({job.model!r} on {job.gpus} GPUs, communication included), which flow timing and the emulator "
            f"make from the job's transfers: use timing.mode: analytic, or gpu_speed factors")


class TypedModel(IterationModel):
    """An analytic model with GPU types: the time per iteration of a placed job is

    * 1 / (table throughput on its slowest type) when the job uses the throughput table;
    * else the wrapped model's time for the job with its compute divided by the speed factor of its
      slowest type (its smallest factor).

    With every factor 1 and no table entry it returns the wrapped model's time unchanged.
    """

    def __init__(self, base: IterationModel, speeds: GpuSpeeds) -> None:
        self.base = base
        self.speeds = speeds
        self.name = base.name
        self.contention_dependent = base.contention_dependent

    def iteration_time(self, job, placement, cluster, running):
        sp = self.speeds
        types = sp.types_of(placement)
        if sp.uses_table(job):
            worst = min(sp.throughput(job, t) for t in types)
            if worst <= 0:
                missing = sorted(t for t in types if sp.throughput(job, t) <= 0)
                raise ValueError(f"job {job.job_id}: the throughput table {sp.table.source} has no throughput for "
                                 f"({job.model!r}, {job.gpus}) on GPU type {', '.join(missing)}")
            return 1.0 / worst
        f = min(sp.factor(t) for t in types)
        return self.base.iteration_time(scaled_job(job, f), placement, cluster, running)
