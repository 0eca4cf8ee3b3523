"""Workload kinds: the ``workload.kind`` of a trial names a loader registered here.

A loader is ``fn(params: dict, ctx: WorkloadContext) -> list[Job]``. It validates
its own parameters (a :class:`LoaderParams` model: unknown keys, NaN and infinity are
refused) and raises :class:`~raytestbed.errors.ConfigError` or
:class:`~raytestbed.errors.TraceError` with a one-line message naming the file,
row and field. :func:`load_workload` then checks every job the same way, whatever
its loader: arrival finite, in [0, MAX_SECONDS] after scaling; iterations in
[1, MAX_INT]; GPUs within the cluster.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import math
import numbers

from pydantic import BaseModel, ConfigDict, ValidationError

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.core.profile import ModelProfile, default_profiles, load_profile_dir
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.csvrows import MAX_INT, MAX_SECONDS


class LoaderParams(BaseModel):
    """Base of every loader's parameter model: unknown keys and non-finite numbers are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


@dataclass
class WorkloadContext:
    """What a loader may use: the cluster, the seed, the trial's folder, the profiles."""

    cluster: Cluster
    seed: int
    base_dir: Path
    profiles: dict[str, ModelProfile]
    where: str = "workload"

    def resolve(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else self.base_dir / p

    def profile(self, model: str, where: str) -> ModelProfile:
        if model not in self.profiles:
            raise TraceError(f"{where}: unknown model {model!r} (known: {', '.join(sorted(self.profiles))})")
        return self.profiles[model]


Loader = Callable[[dict[str, Any], WorkloadContext], list[Job]]
_LOADERS: dict[str, Loader] = {}
_DISCOVERED = False


def register_workload(kind: str) -> Callable[[Loader], Loader]:
    def deco(fn: Loader) -> Loader:
        _LOADERS[kind] = fn
        return fn

    return deco


def workload_kinds() -> list[str]:
    global _DISCOVERED
    if not _DISCOVERED:
        import raytestbed.traces as pkg

        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
        _DISCOVERED = True
    return sorted(_LOADERS)


def parse_params(model: type[BaseModel], params: dict[str, Any], where: str) -> BaseModel:
    """Validate loader parameters; one-line ConfigError naming the field."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        from raytestbed.config import validation_message

        loc, msg = validation_message(e)
        # a model-level check has no loc; its message starts with the field it names
        raise ConfigError(f"{where}: {loc}: {msg}" if loc else f"{where}.{msg}") from None


def load_workload(kind: str, params: dict[str, Any], cluster: Cluster, seed: int, base_dir: Path,
                  where: str = "workload", profile_dir: str | None = None) -> list[Job]:
    """Build the jobs of a trial and check that each fits the cluster."""
    kinds = workload_kinds()
    if kind not in _LOADERS:
        raise ConfigError(f"{where}.kind: unknown workload kind {kind!r} (known: {', '.join(kinds)})")
    profiles = default_profiles()
    if profile_dir:
        profiles.update(load_profile_dir(base_dir / profile_dir))
    ctx = WorkloadContext(cluster, seed, base_dir, profiles, where)
    jobs = _LOADERS[kind](params, ctx)
    if not jobs:
        raise ConfigError(f"{where}: the workload has no jobs")
    total = cluster.total_gpus
    for j in jobs:
        check_job(j, total, where)
    return jobs


def check_job(job: Job, total_gpus: int, where: str) -> None:
    """Refuse a job no backend can run, naming its trace row when the loader recorded one.

    Arrival (seconds, after any scaling) finite and in [0, MAX_SECONDS]; iterations an integer
    in [1, MAX_INT]; GPUs within the cluster's ``total_gpus``.
    """
    place = job.extra.get("trace_row") or where
    a = job.arrival_s
    if not (isinstance(a, numbers.Real) and math.isfinite(a) and 0 <= a <= MAX_SECONDS):
        raise TraceError(f"{place}: job {job.job_id}: arrival {a!r} s (after scaling) is not in "
                         f"[0, {MAX_SECONDS:g}] s")
    n = job.iterations
    if not (isinstance(n, numbers.Integral) and 1 <= n <= MAX_INT):
        raise TraceError(f"{place}: job {job.job_id}: {n!r} iterations (after scaling) is not in [1, {MAX_INT}]")
    if job.gpus > total_gpus:
        raise TraceError(f"{place}: job {job.job_id} needs {job.gpus} GPUs but the cluster has {total_gpus}")
