"""A sweep: trials x grid points x policies x seeds, and its cells.

A sweep file (YAML; ``docs/sweeps.md``)::

    name: asrpt_policies                 # default: the file's stem
    trials: [../trials/asrpt_synthetic.yaml]   # relative to the sweep file
    policies: [asrpt, spjf, fifo+fair,   # policy ids or placement+network pairs; default: each trial's own
               {label: "asrpt[median]", policy: asrpt, params: {predictor: median}}]
    seeds: [1, 2, 3, 4]                  # or a count n: seeds 0..n-1; default: each trial's seed
    backend: sim                         # sim, sim:flow, emu, ...; default: each trial's
    grid:                                # trial fields (dotted paths into the trial file) and their values
      workload.jobs: [300, 600]
      cluster.nic_gbps: [1, 10, 25]
    metrics: [total_jct_s, makespan_s]   # aggregated and plotted (default: JCT, makespan, each paper's objective)

A grid axis whose name is not a trial field maps each value to several field overrides
(``{axis: {values: {LABEL: {field.path: value, ...}}}}``), e.g. to scale a whole cluster per
point. In a field
path, ``@placement`` / ``@network`` stand for the cell's placement / network policy id
(``policy_params.@network.observe_interval_s``), and a number indexes a list
(``cluster.servers.0.count``).

Every cell is one trial file as ``raytestbed run`` would read it (the trial with the
point's overrides and the policy variant's parameters applied), validated when the sweep
is loaded: a bad field is a one-line error before anything runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raytestbed.config import DEFAULTS_AS_BEFORE, LoadedTrial, load_trial, parse_trial, read_yaml
from raytestbed.errors import ConfigError
from raytestbed.resources import package_root, resolve
from raytestbed.schedulers.base import available_policies
from raytestbed.trial import BackendSpec

DEFAULT_METRICS = ["total_jct_s", "avg_jct_s", "makespan_s"]
#: each paper's objective, aggregated when the cells report it (raytestbed/results/objectives.py)
OBJECTIVE_METRICS = ["total_utility", "avg_cct_s", "p95_cct_s", "ratio_to_lb"]
_SAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def safe_name(text: str) -> str:
    """A folder-name-safe version of ``text`` (other characters become ``_``)."""
    return _SAFE.sub("_", str(text)).strip("_") or "_"


@dataclass(frozen=True)
class PolicySpec:
    """One policy line of a sweep: a pair ``placement[+network]`` under a label, with extra parameters.

    ``params`` / ``network_params`` are merged over the trial's ``policy_params`` of the
    placement / network policy for this line only (e.g. A-SRPT with the median predictor).
    """

    label: str
    pair: str
    params: dict[str, Any] = field(default_factory=dict)
    network_params: dict[str, Any] = field(default_factory=dict)

    @property
    def placement(self) -> str:
        return self.pair.split("+")[0].strip()

    @property
    def network(self) -> str | None:
        parts = self.pair.split("+")
        return parts[1].strip() if len(parts) > 1 else None


@dataclass(frozen=True)
class Axis:
    """A grid axis: ``points`` are (value, {field path: value}) in sweep order."""

    name: str
    points: tuple[tuple[Any, dict[str, Any]], ...]

    @classmethod
    def field(cls, path: str, values: list[Any]) -> "Axis":
        return cls(path, tuple((v, {path: v}) for v in values))


@dataclass
class Sweep:
    """A sweep definition (see the module docstring); :meth:`cells` expands it."""

    name: str
    trials: list[LoadedTrial]
    policies: list[PolicySpec] = field(default_factory=list)  #: empty: each trial's own policy
    seeds: list[int] | None = None  #: None: each trial's seed
    backend: str | None = None  #: None: each trial's backend
    grid: list[Axis] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    log_events: bool = True
    cell_reports: bool = False
    where: str = "sweep"
    log_decisions: bool = True

    def cells(self) -> list["Cell"]:
        """Every cell, trial-major, then grid points, policies, seeds; each trial file validated."""
        out: list[Cell] = []
        names = [t.trial.name for t in self.trials]
        if len(set(names)) != len(names):
            raise ConfigError(f"{self.where}: trials: two trials share the name {_dup(names)!r} (give each its own "
                              "name:, their cells would share a folder)")
        labels = [p.label for p in self.policies]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"{self.where}: policies: the label {_dup(labels)!r} appears twice")
        for loaded in self.trials:
            base = loaded.resolved()
            policies = self.policies or [_own_policy(loaded)]
            seeds = self.seeds if self.seeds is not None else [loaded.trial.seed]
            for point in _points(self.grid):
                for pol in policies:
                    data = copy.deepcopy(base)
                    values = []
                    for axis, (value, overrides) in zip(self.grid, point):
                        values.append((axis.name, value))
                        for path, v in overrides.items():
                            set_path(data, path, v, pol, f"{self.where}: grid: {axis.name}")
                    data["policy"] = pol.placement
                    data["network_policy"] = pol.network
                    pp = data.setdefault("policy_params", {})
                    if pol.params:
                        pp[pol.placement] = {**pp.get(pol.placement, {}), **pol.params}
                    if pol.network_params and pol.network:
                        pp[pol.network] = {**pp.get(pol.network, {}), **pol.network_params}
                    where = f"{self.where}: trial {loaded.trial.name}, {_point_text(values)}, policy {pol.label}"
                    parse_trial(data, where, loaded.path)  # one-line error on a bad field, before anything runs
                    for seed in seeds:
                        out.append(Cell(loaded.trial.name, tuple(values), pol.label, pol.pair, int(seed), data,
                                        str(loaded.path) if loaded.path else None,
                                        self.backend or loaded.trial.backend, self.log_events, self.cell_reports,
                                        self.log_decisions))
        return out

    def metric_names(self) -> list[str]:
        return list(self.metrics) or [*DEFAULT_METRICS, *OBJECTIVE_METRICS]

    def axis_names(self) -> list[str]:
        return [a.name for a in self.grid]


@dataclass(frozen=True)
class Cell:
    """One run: a trial (as a resolved trial dict), a policy pair, a seed, a backend."""

    trial: str
    point: tuple[tuple[str, Any], ...]
    policy: str  #: the policy line's label
    pair: str
    seed: int
    data: dict[str, Any]
    path: str | None  #: the trial file (relative workload paths resolve from its folder)
    backend: str
    log_events: bool = True
    report: bool = False
    log_decisions: bool = True

    @property
    def key(self) -> str:
        """The cell's folder, relative to the sweep's ``cells/``."""
        point = "__".join(f"{safe_name(a)}={safe_name(_label(v))}" for a, v in self.point) or "base"
        return f"{safe_name(self.trial)}/{point}/{safe_name(self.policy)}/seed-{self.seed}"

    @property
    def fingerprint(self) -> str:
        """A hash of everything that determines the cell's result (the trial, policy, seed, backend); the
        settings of :data:`~raytestbed.config.DEFAULTS_AS_BEFORE` count only away from their default.

        A trial shipped with the package counts by its path inside the package (:func:`portable_path`), so
        two checkouts or an installed wheel give its cells the same fingerprint; any other trial file by
        its absolute path (relative workload paths resolve from its folder)."""
        return self._hash(portable_path(self.path))

    @property
    def fingerprints(self) -> tuple[str, str]:
        """:attr:`fingerprint`, then the one cells finished before it was portable carry (the trial file's
        absolute path): a finished cell with either is this cell's result."""
        return self.fingerprint, self._hash(self.path)

    def _hash(self, path: str | None) -> str:
        blob = json.dumps({"data": _without_defaults_as_before(self.data), "pair": self.pair, "seed": self.seed,
                           "backend": self.backend, "path": path}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    def describe(self) -> dict[str, Any]:
        """The identifying columns of the cell's row in ``sweep.csv``."""
        return {"trial": self.trial, **{a: v for a, v in self.point}, "policy": self.policy, "seed": self.seed,
                "cell": self.key}


def portable_path(path: str | None) -> str | None:
    """``path`` as a cell's fingerprint counts it: ``package:REL`` for a file inside the package's shipped
    folders (:func:`~raytestbed.resources.package_root`), else unchanged."""
    if path is None:
        return None
    try:
        rel = Path(path).resolve().relative_to(package_root().resolve())
    except ValueError:
        return path
    return f"package:{rel.as_posix()}"


def _without_defaults_as_before(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the settings of :data:`~raytestbed.config.DEFAULTS_AS_BEFORE` that hold their default
    (copies only the sections it changes)."""
    out = dict(data)
    for path, default in DEFAULTS_AS_BEFORE.items():
        section, key = path.split(".")
        sub = out.get(section)
        if isinstance(sub, dict) and key in sub and sub[key] == default:
            out[section] = {k: v for k, v in sub.items() if k != key}
    return out


def _label(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _dup(items: list[str]) -> str:
    seen = set()
    for x in items:
        if x in seen:
            return x
        seen.add(x)
    return ""


def _point_text(values: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{a}={_label(v)}" for a, v in values) or "no grid"


def _points(grid: list[Axis]):
    if not grid:
        yield ()
        return
    import itertools

    yield from itertools.product(*(a.points for a in grid))


def _own_policy(loaded: LoadedTrial) -> PolicySpec:
    t = loaded.trial
    pair = t.policy if "+" in t.policy or not t.network_policy else f"{t.policy}+{t.network_policy}"
    return PolicySpec(pair, pair)


def set_path(data: dict, path: str, value: Any, pol: PolicySpec | None, where: str) -> None:
    """Set ``data[a][b]...`` for the dotted ``path`` (``@placement``/``@network``: the cell's policies)."""
    parts = []
    for p in path.split("."):
        if p == "@placement" and pol is not None:
            p = pol.placement
        elif p == "@network" and pol is not None:
            if pol.network is None:
                return  # a network-policy field for a line without a network policy: nothing to set
            p = pol.network
        parts.append(p)
    node: Any = data
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not p.isdigit() or int(p) >= len(node):
                raise ConfigError(f"{where}: {'.'.join(parts[:i + 1])}: no such list item")
            if last:
                node[int(p)] = copy.deepcopy(value)
            else:
                node = node[int(p)]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"{where}: {'.'.join(parts[:i])} is not a mapping")
        if last:
            node[p] = copy.deepcopy(value)
        else:
            if node.get(p) is None:
                node[p] = {}
            node = node[p]


# --------------------------------------------------------------------------- the YAML file

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyLine(_Strict):
    label: str
    policy: str = Field(description="policy id or placement+network pair")
    params: dict[str, Any] = Field(default_factory=dict)
    network_params: dict[str, Any] = Field(default_factory=dict)


class LabelledAxis(_Strict):
    values: dict[str | int | float, dict[str, Any]] = Field(min_length=1)


class SweepConfig(_Strict):
    """The schema of a sweep file (module docstring)."""

    name: str | None = None
    trial: str | None = None
    trials: list[str] = Field(default_factory=list)
    policies: list[str | PolicyLine] = Field(default_factory=list)
    seeds: list[int] | int | None = None
    backend: str | None = None
    grid: dict[str, list[Any] | LabelledAxis] = Field(default_factory=dict)
    metrics: list[str] = Field(default_factory=list)
    log_events: bool = True
    log_decisions: bool = True
    cell_reports: bool = False


def trial_with(path: str | Path, overrides: dict[str, Any] | None = None, name: str | None = None) -> LoadedTrial:
    """The trial file at ``path`` with dotted-path ``overrides`` applied (and renamed), validated."""
    loaded = load_trial(path)
    data = loaded.resolved()
    for k, v in (overrides or {}).items():
        set_path(data, k, v, None, f"{path}: {k}")
    if name:
        data["name"] = name
    return parse_trial(data, f"{path} (with {', '.join(overrides or {}) or 'no changes'})", loaded.path)


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file (a path, or a shipped sweep's name); trial paths resolve relative to it."""
    p = Path(path)
    if not p.exists():
        p = resolve(path, "sweeps", what="sweep file")
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a sweep must be a mapping")
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise ConfigError(f"{p}: {loc}: {err['msg'].removeprefix('Value error, ')}") from None
    return sweep_from_config(cfg, p)


def sweep_from_config(cfg: SweepConfig, path: Path) -> Sweep:
    where = str(path)
    refs = ([cfg.trial] if cfg.trial else []) + list(cfg.trials)
    if not refs:
        raise ConfigError(f"{where}: trials: give at least one trial file")
    trials = []
    for ref in refs:
        try:
            tp = resolve(ref, "trials", [path.parent], what="trial file")
        except ConfigError as e:
            raise ConfigError(f"{where}: trials: {e}") from None
        trials.append(load_trial(tp))
    policies = []
    for item in cfg.policies:
        if isinstance(item, str):
            policies.append(PolicySpec(item.strip(), item.strip()))
        else:
            policies.append(PolicySpec(item.label, item.policy, dict(item.params), dict(item.network_params)))
    seeds = None
    if isinstance(cfg.seeds, int):
        if cfg.seeds < 1:
            raise ConfigError(f"{where}: seeds: give a count >= 1 or a list of seeds")
        seeds = list(range(cfg.seeds))
    elif cfg.seeds is not None:
        if not cfg.seeds:
            raise ConfigError(f"{where}: seeds: the list is empty")
        seeds = list(cfg.seeds)
    if cfg.backend is not None:
        try:
            BackendSpec.parse(cfg.backend)
        except ConfigError as e:
            raise ConfigError(f"{where}: backend: {e}") from None
    grid = []
    for name, spec in cfg.grid.items():
        if isinstance(spec, LabelledAxis):
            grid.append(Axis(name, tuple((k, dict(v)) for k, v in spec.values.items())))
        else:
            if not spec:
                raise ConfigError(f"{where}: grid: {name}: give at least one value")
            grid.append(Axis.field(name, list(spec)))
    _check_policies(policies, where)
    return Sweep(cfg.name or path.stem, trials, policies, seeds, cfg.backend, grid, list(cfg.metrics),
                 cfg.log_events, cfg.cell_reports, where, cfg.log_decisions)


def _check_policies(policies: list[PolicySpec], where: str) -> None:
    known = available_policies()
    for p in policies:
        parts = p.pair.split("+")
        if len(parts) > 2 or not all(x.strip() for x in parts):
            raise ConfigError(f"{where}: policies: {p.pair!r}: write a policy id or placement+network")
        for x in parts:
            if x.strip() not in known:
                raise ConfigError(f"{where}: policies: unknown policy {x.strip()!r} (raytestbed policies lists them)")
