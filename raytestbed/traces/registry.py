"""Workload kinds: the ``workload.kind`` of a trial names a loader registered here.

A loader is ``fn(params: dict, ctx: WorkloadContext) -> list[Job]``. It validates
its own parameters (a :class:`LoaderParams` model: unknown keys, NaN and infinity are
refused) and raises :class:`~raytestbed.errors.ConfigError` or
:class:`~raytestbed.errors.TraceError` with a one-line message naming the file,
row and field.

Kinds outside the package (an installed distribution's ``raytestbed.workloads`` entry point,
or an import path ``workload: {kind: my_traces:load, ...}``) are plug-ins
(:mod:`raytestbed.plugins`); what a plug-in returns is checked (a list of ``Job``, ids unique).
:func:`load_workload` then checks every job the same way, whatever
its loader: arrival finite, in [0, MAX_SECONDS] after scaling; iterations in
[1, MAX_INT]; GPUs within the cluster.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from raytestbed.config import validation_message
from raytestbed.core.cluster import Cluster, NotIdenticalServers
from raytestbed.core.job import Job
from raytestbed.core.profile import ModelProfile, default_profiles
from raytestbed.errors import ConfigError, PluginError, TraceError
from raytestbed.plugins import Registry
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


def _check_loader(obj: Any, label: str) -> None:
    """Raise :class:`PluginError` unless ``obj`` can be called as ``fn(params, ctx)``."""
    if inspect.isclass(obj) or not callable(obj):
        raise PluginError(f"{label}: it is a {type(obj).__name__}, not a function fn(params: dict, "
                          f"ctx: WorkloadContext) -> list[Job]")
    try:
        inspect.signature(obj).bind({}, None)
    except TypeError:
        raise PluginError(f"{label}: {getattr(obj, '__qualname__', obj)}{inspect.signature(obj)} cannot be called "
                          f"as fn(params: dict, ctx: WorkloadContext) -> list[Job]") from None
    except ValueError:  # no signature (a builtin): accept, the call will tell
        pass


#: every workload kind: the package's (``@register_workload``), entry points ``raytestbed.workloads``,
#: import paths ``module:function``
WORKLOADS = Registry("workload kind", "raytestbed.workloads", "raytestbed.traces", _check_loader)


def register_workload(kind: str, identical_servers: str | None = None) -> Callable[[Loader], Loader]:
    """Function decorator: make a loader available as ``workload.kind: KIND``.

    ``identical_servers``: the reason the loader needs servers with the same GPU count (e.g. "builds
    A-SRPT jobs"); on another cluster the kind is refused in one line before it reads anything."""

    def deco(fn: Loader) -> Loader:
        _check_loader(fn, f"workload kind {kind!r}")
        fn.needs_identical_servers = identical_servers
        WORKLOADS.register(kind, fn)
        return fn

    return deco


def workload_kinds() -> list[str]:
    """Ids of the registered workload kinds and of the installed entry points."""
    return WORKLOADS.names()


def parse_params(model: type[BaseModel], params: dict[str, Any], where: str) -> BaseModel:
    """Validate loader parameters; one-line ConfigError naming the field."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        loc, msg = validation_message(e)
        # a model-level check has no loc; its message starts with the field it names
        raise ConfigError(f"{where}: {loc}: {msg}" if loc else f"{where}.{msg}") from None


def load_workload(kind: str, params: dict[str, Any], cluster: Cluster, seed: int, base_dir: Path,
                  where: str = "workload", profiles: Mapping[str, ModelProfile] | None = None) -> list[Job]:
    """Build the jobs of a trial and check that each fits the cluster; ``profiles``: the model profiles
    by name (default: the shipped ones; a trial's ``profiles:`` folder replaces some)."""
    if ":" not in kind and kind not in WORKLOADS.names():
        raise ConfigError(f"{where}.kind: unknown workload kind {kind!r} (known: {', '.join(workload_kinds())}; "
                          f"or an import path 'module:function')")
    plugin = WORKLOADS.get(kind, [base_dir])
    profiles = dict(profiles) if profiles is not None else default_profiles()
    ctx = WorkloadContext(cluster, seed, base_dir, profiles, where)
    reason = getattr(plugin.obj, "needs_identical_servers", None)
    if reason and not cluster.identical_servers:
        counts = ", ".join(map(str, sorted({s.gpus for s in cluster.servers})))
        raise ConfigError(f"{where}: workload kind {kind!r} {reason}, which needs identical servers (the same "
                          f"GPU count each); cluster {cluster.name!r} has servers of {counts} GPUs")
    try:
        jobs = plugin.obj(params, ctx)
    except NotIdenticalServers as e:
        raise ConfigError(f"{where}: workload kind {kind!r} needs identical servers: {e}") from None
    if not plugin.builtin:
        _check_jobs(jobs, f"{where}: workload kind {kind!r}")
    if not jobs:
        raise ConfigError(f"{where}: the workload has no jobs")
    total = cluster.total_gpus
    for j in jobs:
        check_job(j, total, where)
    return jobs


def _check_jobs(jobs: Any, label: str) -> None:
    """A plug-in loader must return a list of :class:`Job` with unique ids (one-line PluginError)."""
    if not isinstance(jobs, list):
        raise PluginError(f"{label}: returned a {type(jobs).__name__}, not a list of raytestbed Job objects")
    seen: set[int] = set()
    for i, j in enumerate(jobs):
        if not isinstance(j, Job):
            raise PluginError(f"{label}: item {i} is a {type(j).__name__}, not a raytestbed Job")
        if j.job_id in seen:
            raise PluginError(f"{label}: job id {j.job_id} appears twice")
        seen.add(j.job_id)


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
