"""Pydantic schemas for cluster and trial YAML files, and their loaders.

Bandwidths are written as papers write them (``nic_gbps: 10``,
``intra_gbytes_per_s: 300``) and converted to bytes/s here, once (DESIGN
principle 3). Every validation problem becomes a one-line
:class:`~raytestbed.errors.ConfigError` naming the file and the field.
See ``docs/trials.md`` for a commented example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.errors import ConfigError
from raytestbed.units import gbps_to_bytes_per_s, gbytes_per_s_to_bytes_per_s

REPO_ROOT = Path(__file__).resolve().parents[1]
CLUSTER_CONFIG_DIR = REPO_ROOT / "cluster_configs"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerGroup(_Strict):
    """``count`` identical servers."""

    count: PositiveInt = 1
    gpus: PositiveInt
    nic_gbps: PositiveFloat | None = Field(None, description="overrides the cluster's nic_gbps")
    memory_gb: float = Field(0.0, ge=0)
    rack: int | None = Field(None, ge=0, description="rack index (two-tier topology only)")


class RackConfig(_Strict):
    """A rack's ToR <-> core links."""

    uplink_gbps: PositiveFloat
    downlink_gbps: PositiveFloat | None = None


class ClusterConfig(_Strict):
    """A cluster file (``cluster_configs/*.yaml``)."""

    name: str = "cluster"
    description: str = ""
    nic_gbps: PositiveFloat = Field(description="NIC bandwidth per server and direction, Gbit/s")
    intra_gbytes_per_s: PositiveFloat = Field(description="GPU-to-GPU bandwidth inside a server, GB/s")
    servers: list[ServerGroup] = Field(min_length=1)
    racks: list[RackConfig] = Field(default_factory=list)
    servers_per_rack: PositiveInt | None = Field(
        None, description="assign servers to racks contiguously (when groups give no rack)"
    )

    @model_validator(mode="after")
    def _racks_consistent(self) -> "ClusterConfig":
        n = len(self.racks)
        for i, g in enumerate(self.servers):
            if g.rack is not None and g.rack >= n:
                raise ValueError(f"servers[{i}].rack = {g.rack} but only {n} racks are defined")
        if self.servers_per_rack is not None and n == 0:
            raise ValueError("servers_per_rack needs a racks list")
        return self

    def build(self) -> Cluster:
        """The :class:`Cluster` with every bandwidth in bytes/s."""
        servers = []
        sid = 0
        for g in self.servers:
            bw = gbps_to_bytes_per_s(g.nic_gbps or self.nic_gbps)
            for _ in range(g.count):
                rack = g.rack
                if rack is None and self.servers_per_rack is not None:
                    rack = min(sid // self.servers_per_rack, len(self.racks) - 1)
                servers.append(Server(sid, g.gpus, bw, bw, rack=rack, memory_gb=g.memory_gb))
                sid += 1
        racks = tuple(
            Rack(i, gbps_to_bytes_per_s(r.uplink_gbps), gbps_to_bytes_per_s(r.downlink_gbps or r.uplink_gbps))
            for i, r in enumerate(self.racks)
        )
        return Cluster(tuple(servers), gbytes_per_s_to_bytes_per_s(self.intra_gbytes_per_s), racks, self.name)


class WorkloadConfig(BaseModel):
    """Which jobs to run: ``kind`` names a loader in :mod:`raytestbed.traces`; other keys are its parameters."""

    model_config = ConfigDict(extra="allow")
    kind: str


class TimingConfig(_Strict):
    """How the simulator computes job progress (see :mod:`raytestbed.sim.engine`)."""

    mode: Literal["analytic", "flow"] = "analytic"
    model: Literal["asrpt", "sjfbco", "gadget"] = "asrpt"
    model_params: dict[str, float] = Field(default_factory=dict)
    iterations_per_coflow: PositiveInt = 1
    until_s: PositiveFloat | None = Field(
        None, description="simulator: stop the clock at this simulated time, seconds (GADGET's horizon T = slots x "
        "slot_s); jobs still running then count as unfinished and keep their progress (summary total_utility)")


class EmuConfig(_Strict):
    """The ``emu:`` section: how ``--backend emu`` runs the trial (see docs/emulator.md, docs/trials.md)."""

    time_scale: PositiveFloat | None = Field(
        None, description="emulated seconds per wall second (10: one wall second is ten seconds of the emulated "
        "cluster); default: the largest that keeps every NIC at <= 100 MB/s wall (raytestbed.emu.timescale)")
    fabric: Literal["paced", "virtual"] = Field("paced", description="fabric clock (docs/emulator.md)")
    nic_share: Literal["fair", "reserved"] = Field(
        "fair", description="fair: flows share each NIC by weighted max-min (a lone flow gets the whole NIC); "
        "reserved: every GPU owns NIC/g of its server's NIC in each direction (A-SRPT's network model, spec "
        "README §3 reserved_share; compare with the simulator's analytic asrpt timing)")
    compute: Literal["replay", "real"] = Field(
        "replay", description="replay: hold each emulated GPU for the profiled time; real: run the PyTorch stages")
    address: str | None = Field(None, description="Ray cluster address to attach to (default: start a local Ray)")
    progress_s: PositiveFloat = Field(
        1.0, description="wall seconds between fabric polls for coflow events and bytes sent")
    worker_pool: bool = Field(
        True, description="start one long-lived host actor per emulated GPU before the trial clock, so a job "
        "start only sends RPCs (false: every job start creates its own worker actors)")


class TrialConfig(_Strict):
    """A trial file: cluster + workload + policy + backend + seed."""

    name: str = "trial"
    seed: int = 0
    cluster: str | dict[str, Any] = Field(
        description="path (relative to the trial file, or a name in cluster_configs/) or an inline cluster mapping"
    )
    workload: WorkloadConfig
    policy: str = "fifo"
    network_policy: str | None = None
    policy_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    backend: Literal["sim", "emu"] = "sim"
    emu: EmuConfig = Field(default_factory=EmuConfig, description="emulator settings (backend emu only)")
    faults: list[str] = Field(default_factory=list, description='e.g. "kill_server:1@120s"')


def _format_error(where: str, err: ValidationError) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}: {loc}: {msg}{more}"


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file; raise ConfigError with the file and line on a syntax error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None


def parse_cluster(data: Any, where: str) -> ClusterConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a cluster config must be a mapping")
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(where, e)) from None


def load_cluster(path: str | Path) -> ClusterConfig:
    """Load and validate a cluster YAML file."""
    return parse_cluster(read_yaml(path), str(path))


def resolve_cluster_path(ref: str, base_dir: Path) -> Path:
    """A cluster reference from a trial: relative to the trial file, else a name in cluster_configs/."""
    for cand in (base_dir / ref, CLUSTER_CONFIG_DIR / ref, CLUSTER_CONFIG_DIR / f"{ref}.yaml"):
        if cand.is_file():
            return cand
    raise ConfigError(f"cluster {ref!r} not found (looked in {base_dir} and {CLUSTER_CONFIG_DIR})")


class LoadedTrial(BaseModel):
    """A validated trial with its cluster resolved."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    trial: TrialConfig
    cluster_config: ClusterConfig
    path: Path | None = None

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()

    def resolved(self) -> dict[str, Any]:
        """The trial as a plain dict with the cluster inlined (written as ``config.yaml``)."""
        d = self.trial.model_dump(mode="json")
        d["cluster"] = self.cluster_config.model_dump(mode="json")
        return d


def load_trial(path: str | Path) -> LoadedTrial:
    """Load a trial YAML file, validate it and resolve its cluster."""
    p = Path(path)
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a trial must be a mapping")
    return parse_trial(data, str(p), p)


def parse_trial(data: dict, where: str, path: Path | None = None) -> LoadedTrial:
    try:
        trial = TrialConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(where, e)) from None
    base = path.parent if path is not None else Path.cwd()
    if isinstance(trial.cluster, str):
        cpath = resolve_cluster_path(trial.cluster, base)
        cluster_cfg = load_cluster(cpath)
    else:
        try:
            cluster_cfg = ClusterConfig.model_validate(trial.cluster)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(["cluster", *(str(x) for x in err["loc"])])
            raise ConfigError(f"{where}: {loc}: {err['msg'].removeprefix('Value error, ')}") from None
    try:
        cluster_cfg.build()
    except ValueError as e:
        raise ConfigError(f"{where}: cluster: {e}") from None
    return LoadedTrial(trial=trial, cluster_config=cluster_cfg, path=path)
