"""The Python API, for notebooks and scripts: everything here is also importable from ``raytestbed``.

Run trials::

    import raytestbed as rtb

    trial = rtb.load_trial("workloads/trials/demo.yaml", seed=3, workload={"jobs": 20})
    res = rtb.run(trial, "fifo")                        # simulator, results kept in memory
    res.summary["total_jct_s"], res.jobs.head()         # pandas Series / DataFrame
    cmp = rtb.compare(trial, ["fifo", "asrpt", "my_policies:SmallestFirst"], out="results/cmp")
    cmp.table                                           # one row per policy (comparison.csv)
    rtb.compare(trial, ["fifo", "asrpt"], backend="emu", address="HEAD_IP:6379")  # on a Ray cluster

Write a policy: subclass :class:`Policy`, react to the events (:class:`JobArrived`, ...) with
decisions (:class:`StartJob`, ...) reading the :class:`ClusterView`; the contract is
``docs/policies.md``, a walk-through ``docs/tutorial.md``. A policy is named by id (``fifo``), by
import path (``my_policies:SmallestFirst``), or passed as the class itself (it is then named by
its import path); ``"a+b"`` or ``(A, B)`` runs a placement and a network policy together.

This module only puts a small surface over :mod:`raytestbed.trial` (the runner behind the CLI):
the results folders, the summaries and the tables are the CLI's.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import raytestbed.config as _config
import raytestbed.trial as _trial
from raytestbed.core.cluster import Cluster
from raytestbed.core.events import (
    CoflowFinished,
    CoflowGrew,
    CoflowStarted,
    Decision,
    Event,
    IterationMeasured,
    JobArrived,
    JobFailed,
    JobFinished,
    JobStarted,
    Preempt,
    Resize,
    ServerLost,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    Tick,
    WakeUp,
)
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.core.state import ClusterView, CoflowInfo, FlowInfo, FreePool, RunningJob
from raytestbed.errors import ConfigError, PluginError, PolicyError, PolicyFault, RaytestbedError, TraceError
from raytestbed.results.writer import FolderExistsError, policy_folder
from raytestbed.schedulers.base import POLICIES, describe_policy, register_policy
from raytestbed.traces.jobs import build_job
from raytestbed.traces.registry import WORKLOADS, WorkloadContext, load_workload, parse_params, register_workload

__all__ = [
    # running trials
    "Trial", "Result", "Comparison", "load_trial", "run", "compare", "policies", "workloads",
    # writing a policy
    "Policy", "ClusterView", "FreePool", "RunningJob", "CoflowInfo", "FlowInfo", "Placement",
    "Event", "JobArrived", "JobStarted", "JobFinished", "JobFailed", "IterationMeasured", "CoflowStarted",
    "CoflowGrew", "CoflowFinished", "Tick", "ServerLost",
    "Decision", "StartJob", "Preempt", "Resize", "WakeUp", "SetFlowWeights", "SetFlowRates",
    "register_policy",
    # writing a workload kind
    "Job", "Stage", "StageProfile", "CommPattern", "Cluster", "WorkloadContext", "build_job", "parse_params",
    "register_workload",
    # errors
    "RaytestbedError", "ConfigError", "TraceError", "PolicyError", "PolicyFault", "PluginError",
]

PolicyLike = str | type[Policy]


# --------------------------------------------------------------------------- trials
@dataclass(frozen=True)
class Trial:
    """A validated trial (cluster + workload + policy + backend + seed; ``docs/trials.md``).

    Make one with :func:`load_trial`; :meth:`replace` gives a changed copy. ``config`` is the
    trial as a plain dict, ``cluster`` the built :class:`Cluster`.
    """

    loaded: _config.LoadedTrial

    @property
    def name(self) -> str:
        return self.loaded.trial.name

    @property
    def seed(self) -> int:
        return self.loaded.trial.seed

    @property
    def config(self) -> dict[str, Any]:
        """The trial as a plain dict, its cluster inlined (what a results folder's ``config.yaml`` holds)."""
        return self.loaded.resolved()

    @property
    def cluster(self) -> Cluster:
        return self.loaded.cluster_config.build()

    def replace(self, **changes: Any) -> "Trial":
        """A copy with fields changed: a section given as a mapping (``workload``, ``cluster``, ``emu``,
        ``timing``, ``policy_params``) gets those keys replaced and keeps its others; anything else replaces.

        ``trial.replace(seed=2, workload={"jobs": 4}, emu={"compute": "real"})`` keeps the workload's
        and the emulator's other settings; ``cluster={"servers": [...]}`` changes the servers of the
        trial's cluster (also one named by file). The result is validated like a trial file
        (one-line :class:`ConfigError` naming the field).
        """
        data = self.loaded.trial.model_dump(mode="json", exclude_unset=True)
        if isinstance(changes.get("cluster"), Mapping):
            data["cluster"] = self.loaded.cluster_config.model_dump(mode="json", exclude_unset=True)
        data = _merge(data, changes)
        where = f"{self.loaded.path or 'trial'} (changed: {', '.join(changes)})"
        return Trial(_config.parse_trial(data, where, self.loaded.path))

    def jobs(self, seed: int | None = None) -> list[Job]:
        """The workload's jobs (as a run builds them) — to look at, not to change."""
        t = self.loaded.trial
        wl = t.workload.model_dump()
        kind = wl.pop("kind")
        return load_workload(kind, wl, self.cluster, t.seed if seed is None else seed, self.loaded.base_dir,
                             where=f"{self.loaded.path or 'trial'}: workload", profiles=self.loaded.profiles)

    def __repr__(self) -> str:
        t = self.loaded.trial
        return (f"Trial({t.name!r}, cluster={self.loaded.cluster_config.name!r}, workload={t.workload.kind!r}, "
                f"policy={t.policy!r}, backend={t.backend!r}, seed={t.seed})")


def _merge(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``: a mapping updates a mapping one level deep; anything else replaces."""
    out = dict(base)
    for k, v in changes.items():
        out[k] = {**out[k], **v} if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def load_trial(source: str | Path | Mapping[str, Any] | Trial, **changes: Any) -> Trial:
    """A trial from a YAML file, a dict (paths in it relative to the current folder) or a :class:`Trial`,
    with ``changes`` applied as by :meth:`Trial.replace`."""
    if isinstance(source, Trial):
        trial = source
    elif isinstance(source, Mapping):
        trial = Trial(_config.parse_trial(dict(source), "trial"))
    else:
        trial = Trial(_config.load_trial(source))
    return trial.replace(**changes) if changes else trial


# --------------------------------------------------------------------------- results
@dataclass
class Result:
    """One run: ``summary`` (a Series: ``summary.json``), ``jobs`` (a DataFrame: ``jobs.csv``, one row per
    job), ``folder`` (the results folder, None when the run was kept in memory only)."""

    summary: pd.Series
    jobs: pd.DataFrame
    folder: Path | None = None

    @classmethod
    def read(cls, folder: Path, keep: bool = True) -> "Result":
        """The result in results folder ``folder`` (``keep``: remember the folder)."""
        folder = Path(folder)
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        jobs = pd.read_csv(folder / "jobs.csv")
        return cls(pd.Series(summary, name=str(summary.get("policy"))), jobs, folder if keep else None)

    def __repr__(self) -> str:
        s = self.summary
        return (f"Result(policy={s.get('policy')!r}, backend={s.get('backend')!r}, jobs={s.get('jobs')}, "
                f"total_jct_s={s.get('total_jct_s')!r}, folder={str(self.folder) if self.folder else None!r})")


@dataclass
class Comparison:
    """Several policies on the same jobs: ``table`` (a DataFrame: ``comparison.csv``, one row per policy),
    ``results`` (policy -> :class:`Result`), ``folder`` (None when kept in memory only)."""

    table: pd.DataFrame
    results: dict[str, Result] = field(default_factory=dict)
    folder: Path | None = None

    @property
    def jobs(self) -> pd.DataFrame:
        """Every policy's per-job table, one below the other, with a ``policy`` column first."""
        return pd.concat([r.jobs.assign(policy=name)[["policy", *r.jobs.columns]]
                          for name, r in self.results.items()], ignore_index=True)

    @classmethod
    def read(cls, folder: Path, keep: bool = True) -> "Comparison":
        folder = Path(folder)
        table = pd.read_csv(folder / "comparison.csv")
        results = {p: Result.read(folder / policy_folder(p), keep) for p in table["policy"].astype(str)}
        return cls(table, results, folder if keep else None)


# --------------------------------------------------------------------------- running
def _policy_id(p: PolicyLike | Sequence[PolicyLike]) -> str:
    """A policy id, import path, pair "a+b", class, or (placement, network) pair -> the id string."""
    if isinstance(p, str):
        return p
    if isinstance(p, type):
        if not issubclass(p, Policy):
            raise PluginError(f"policy {p.__qualname__}: does not subclass raytestbed.Policy")
        if "<locals>" in p.__qualname__:
            raise PluginError(f"policy {p.__qualname__}: define it at the top level of a module or notebook "
                              f"(a class inside a function cannot be named by import path)")
        return f"{p.__module__}:{p.__qualname__}"
    if isinstance(p, (tuple, list)) and len(p) == 2:
        return "+".join(_policy_id(x) for x in p)
    raise ConfigError(f"policy {p!r}: give an id, an import path 'module:Class', a Policy subclass, "
                      f"or a (placement, network) pair")


def _prepare(trial: Trial | str | Path | Mapping[str, Any], address: str | None) -> Trial:
    t = load_trial(trial)
    return t.replace(emu={"address": address}) if address is not None else t


def run(trial: Trial | str | Path | Mapping[str, Any], policy: PolicyLike | Sequence[PolicyLike] | None = None, *,
        backend: str | None = None, seed: int | None = None, out: str | Path | None = None, force: bool = False,
        address: str | None = None, progress: bool = False) -> Result:
    """Run ``trial`` with one policy (or placement + network pair); the same run as ``raytestbed run``.

    Args:
        trial: a :class:`Trial`, a trial file or a dict.
        policy: default the trial's (``policy`` + ``network_policy``).
        backend: ``sim`` (``sim:analytic``, ``sim:flow``) or ``emu`` (``emu:replay``, ``emu:real``);
            default the trial's.
        seed: default the trial's.
        out: results folder to write (with ``report.md`` and plots); None: a temporary folder,
            read back and removed (``Result.folder`` is None).
        force: replace an existing ``out``.
        address: Ray cluster address for ``emu`` (sets the trial's ``emu.address``; default: the
            trial's, else ``RAY_ADDRESS``, else a private local Ray).
        progress: show a progress bar.
    """
    t = _prepare(trial, address)
    pol = _policy_id(policy) if policy is not None else None
    if out is not None:
        try:
            _trial.run(t.loaded, Path(out), policy=pol, seed=seed, force=force, show_progress=progress,
                       backend=backend)
        except FolderExistsError as e:
            raise e.for_python() from None
        return Result.read(Path(out))
    with tempfile.TemporaryDirectory(prefix="raytestbed-") as d:
        _trial.run(t.loaded, Path(d) / "run", policy=pol, seed=seed, show_progress=progress, backend=backend,
                   report=False)
        return Result.read(Path(d) / "run", keep=False)


def compare(trial: Trial | str | Path | Mapping[str, Any], policies: Iterable[PolicyLike | Sequence[PolicyLike]], *,
            backend: str | None = None, seed: int | None = None, out: str | Path | None = None,
            force: bool = False, address: str | None = None, progress: bool = False) -> Comparison:
    """Run several policies on the same jobs; the same runs as ``raytestbed compare``.

    Arguments as :func:`run`; ``out`` gets one sub-folder per policy, ``comparison.csv``,
    ``comparison.png`` (total JCT and makespan per policy) and ``report.md``.
    """
    t = _prepare(trial, address)
    pols = [_policy_id(p) for p in policies]
    if not pols:
        raise ConfigError("compare: give at least one policy")
    if out is not None:
        try:
            _trial.compare(t.loaded, Path(out), pols, seed=seed, force=force, show_progress=progress,
                           backend=backend)
        except FolderExistsError as e:
            raise e.for_python() from None
        return Comparison.read(Path(out))
    with tempfile.TemporaryDirectory(prefix="raytestbed-") as d:
        _trial.compare(t.loaded, Path(d) / "cmp", pols, seed=seed, show_progress=progress, backend=backend,
                       report=False)
        return Comparison.read(Path(d) / "cmp", keep=False)


def policies(*extra: str) -> pd.DataFrame:
    """Every policy (and the ``extra`` import paths): ``name``, ``role``, ``origin``, ``description``."""
    return pd.DataFrame([{"name": p.name, "role": p.obj.role, "origin": p.origin,
                          "description": describe_policy(p.obj)} for p in POLICIES.all(extra)])


def workloads(*extra: str) -> pd.DataFrame:
    """Every workload kind (and the ``extra`` import paths): ``name``, ``origin``."""
    return pd.DataFrame([{"name": p.name, "origin": p.origin} for p in WORKLOADS.all(extra)])
