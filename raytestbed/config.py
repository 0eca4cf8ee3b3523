"""Pydantic schemas for cluster and trial YAML files, and their loaders.

Bandwidths are written as papers write them (``nic_gbps: 10``,
``intra_gbytes_per_s: 300``) and converted to bytes/s here, once (DESIGN
principle 3). Every validation problem becomes a one-line
:class:`~raytestbed.errors.ConfigError` naming the file, the field and the value given.
NaN and infinity are refused in every numeric field (``timing.model_params`` alone accepts
infinity, e.g. ``reduction_bps: .inf`` = no reduction).
See ``docs/trials.md`` for a commented example.
"""

from __future__ import annotations

from pathlib import Path
import math
from typing import Annotated, Any, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat,
                      PositiveInt, ValidationError, field_validator, model_validator)

from raytestbed.core.cluster import DEFAULT_GPU_TYPE, Cluster, Rack, Server
from raytestbed.core.profile import ModelProfile, model_profiles, resolve_profile_dir
from raytestbed.errors import ConfigError
from raytestbed.resources import package_dir, package_root, resolve
from raytestbed.units import gbps_to_bytes_per_s, gbytes_per_s_to_bytes_per_s

MAX_SEED = 2 ** 63 - 1  #: seeds are integers in [0, MAX_SEED] (trial files and --seed)
#: the shipped cluster files and their root (:mod:`raytestbed.resources`: a source checkout's root,
#: or the installed package's ``bundled/`` folder)
CLUSTER_CONFIG_DIR = package_dir("clusters")
REPO_ROOT = package_root()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _not_nan(v: float) -> float:
    if math.isnan(v):
        raise ValueError("NaN is not a number")
    return v


#: a model parameter: finite or infinite, never NaN
_ModelParam = Annotated[float, Field(allow_inf_nan=True), AfterValidator(_not_nan)]


class ServerGroup(_Strict):
    """``count`` identical servers."""

    count: PositiveInt = 1
    gpus: PositiveInt
    nic_gbps: PositiveFloat | None = Field(None, description="overrides the cluster's nic_gbps")
    memory_gb: float = Field(0.0, ge=0)
    rack: int | None = Field(None, ge=0, description="rack index (two-tier topology only)")
    gpu_type: str = Field(DEFAULT_GPU_TYPE, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$",
                          description="the type of every GPU of these servers, e.g. v100 (a row name of the "
                          "throughput table, or a key of gpu_speed)")


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
    gpu_speed: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="GPU type -> compute speed factor relative to the model profiles "
        "(profiled compute time / factor = time on that type); types not listed: 1")

    @model_validator(mode="after")
    def _types_known(self) -> "ClusterConfig":
        types = {g.gpu_type for g in self.servers}
        for t in self.gpu_speed:
            if t not in types:
                raise ValueError(f"gpu_speed: no server group has gpu_type {t!r} (types: {', '.join(sorted(types))})")
        return self

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
                servers.append(Server(sid, g.gpus, bw, bw, rack=rack, memory_gb=g.memory_gb, gpu_type=g.gpu_type))
                sid += 1
        racks = tuple(
            Rack(i, gbps_to_bytes_per_s(r.uplink_gbps), gbps_to_bytes_per_s(r.downlink_gbps or r.uplink_gbps))
            for i, r in enumerate(self.racks)
        )
        return Cluster(tuple(servers), gbytes_per_s_to_bytes_per_s(self.intra_gbytes_per_s), racks, self.name,
                       gpu_speed=tuple(sorted(self.gpu_speed.items())))


class WorkloadConfig(BaseModel):
    """Which jobs to run: ``kind`` names a loader in :mod:`raytestbed.traces`; other keys are its parameters."""

    model_config = ConfigDict(extra="allow")
    kind: str


#: settings whose default runs every trial exactly as before the setting existed (dotted path -> that
#: default): a sweep cell's fingerprint leaves them out at that value, so the cells finished before the
#: setting was added still resume (raytestbed.experiments.spec.Cell.fingerprint)
DEFAULTS_AS_BEFORE = {"timing.compute_noise": 0.0, "timing.compute_noise_seed": 0}


class TimingConfig(_Strict):
    """How the simulator computes job progress (see :mod:`raytestbed.sim.engine`)."""

    mode: Literal["analytic", "flow"] = "analytic"
    model: Literal["asrpt", "sjfbco", "gadget"] = "asrpt"
    model_params: dict[str, _ModelParam] = Field(default_factory=dict)
    iterations_per_coflow: PositiveInt = 1
    schedule: Literal["workers", "transfers", "coflows"] = Field(
        "workers", description="flow mode, pipelines of two or more stages and parameter-server jobs: 'workers' "
        "runs every stage replica and PS task on the emulator's worker schedule (the emulator's timing; one "
        "flow per transfer, 40 per iteration of a 4-stage pipeline with 2 replicas per stage); 'coflows' "
        "times an iteration as compute and then job-wide coflows (an approximation with fewer events: "
        "raytestbed.network.traffic). Ring-all-reduce jobs are one coflow per iteration with both, and run "
        "worker by worker with 'transfers' (the emulator's 2(k-1) ring steps: what a network policy sees "
        "on the emulator; 2(k-1) x k flows per iteration instead of k)")
    fast_forward: bool = Field(
        True, description="flow mode: skip whole periods of a worker-by-worker run whose iterations repeat, "
        "while it shares no link with another job and nothing can change on its links (no arrival, tick or "
        "fault, no other job able to finish): the same per-job times as running every event, up to rounding "
        "(raytestbed.sim.fastforward); off with a network policy")
    admission_epoch_s: NonNegativeFloat = Field(
        0.0, description="look at arrivals only every this many seconds, admitting each job at the start of "
        "the epoch its arrival falls in, up to one epoch early (CoflowSim: 10.24; 0 = exact arrivals); "
        "job times count from admission (raytestbed.core.job.admit_in_epochs)")
    throughputs: str | None = Field(
        None, description="a throughput table of iterations/s per GPU type, job type and GPU count (Gavel's JSON "
        "format, raytestbed.core.gpu_types): a path relative to the trial file, or 'gavel' / 'gavel-physical' for "
        "the Gavel throughput data set in the data folder; jobs whose model is a job type of the table run at its "
        "speed on each GPU type (analytic timing)")
    restore_s: NonNegativeFloat = Field(
        0.0, description="seconds a job spends restoring its checkpoint each time it starts again after a "
        "preemption, a failure or a resize (holding its GPUs, no progress; analytic timing)")
    compute_noise: NonNegativeFloat = Field(
        0.0, description="flow timing, jobs run worker by worker: multiply every forward and backward pass's "
        "profiled charge by a lognormal factor of mean 1 and this coefficient of variation (e.g. 0.02), drawn "
        "from the run's seed: how a result moves under the pass-to-pass jitter real compute has (docs/emulator.md, "
        "'Real compute'). 0 = none; fast-forward is off with noise")
    compute_noise_seed: NonNegativeInt = Field(
        0, description="with compute_noise: seeds the noise's draws together with the run's seed (sweep it for "
        "other draws on the same jobs)")
    until_s: PositiveFloat | None = Field(
        None, description="simulator: stop the clock at this simulated time, seconds (GADGET's horizon T = slots x "
        "slot_s); jobs still running then count as unfinished and keep their progress (summary total_utility)")


class FastForwardConfig(_Strict):
    """``emu.fast_forward``: skipping steady iterations (docs/emulator.md, "Fast-forward")."""

    enabled: bool = Field(True, description="skip steady iterations up to the next event that can change their rate")
    window: PositiveInt = Field(4, description="a lone real-compute run is skipped after 2 x window iterations "
                                "(after the last change and the fill) at their mean rate; replay runs' patterns "
                                "may repeat with a lag of up to 2 x window iterations")
    min_iterations: PositiveInt = Field(4, description="skip only when every run can skip at least this many")
    margin: NonNegativeInt = Field(2, description="iterations each run keeps to run for real before its end")
    period_tolerance: NonNegativeFloat = Field(
        1e-6, description="replay runs, and runs sharing links, are skipped only by whole periods of a "
        "repeating pattern: how closely (relative) each run's iteration times must repeat and the runs' "
        "periods fit one common period")


class EmuConfig(_Strict):
    """The ``emu:`` section: how ``--backend emu`` runs the trial (see docs/emulator.md, docs/trials.md)."""

    nic_share: Literal["fair", "reserved"] = Field(
        "fair", description="fair: flows share each NIC by weighted max-min (a lone flow gets the whole NIC); "
        "reserved: every GPU owns NIC/g of its server's NIC in each direction (A-SRPT's network model; "
        "compare with the simulator's analytic asrpt timing)")
    compute: Literal["replay", "real"] = Field(
        "replay", description="replay: charge each stage's profiled compute time; real: run the PyTorch stages "
        "and charge their CPU time at the emulated GPU's speed")
    compute_factor: PositiveFloat | None = Field(
        None, description="real compute: emulated GPU seconds per CPU second for every stage; default: each "
        "pass charged its stage's profiled time x recent / typical CPU time (docs/emulator.md, 'Real compute')")
    compute_device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="real compute: cpu (passes timed as thread CPU time), cuda (CUDA event time on the "
        "GPU torch sees in each worker; the CPU, with a warning, where it sees none), auto (cuda if seen)")
    fast_forward: FastForwardConfig | bool = Field(
        default_factory=FastForwardConfig, description="skip steady iterations (true/false or the settings)")
    pace: PositiveFloat | None = Field(
        None, description="at most this many emulated seconds per wall second (a live demo at human speed); "
        "default: as fast as the host runs. Results do not depend on it")
    address: str | None = Field(None, description="Ray cluster address to attach to (default: start a local Ray)")
    replay_payload_bytes: NonNegativeInt | None = Field(
        1 << 20, description="replay: the largest buffer that really moves through Ray per transfer (null: the "
        "profiled size); the fabric charges the profiled size either way, so emulated times do not change")
    gpus_per_actor: PositiveInt | None = Field(
        None, description="emulated GPUs per worker-pool host process (default: a whole server for replay "
        "compute, 1 for real compute). Results do not depend on it")
    workers: Literal["auto", "pool", "clock"] = Field(
        "auto", description="where the runs' workers and PS tasks live: pool (the worker pool's host processes, "
        "one per GPU group, their messages to the clock actor through Ray), clock (in the clock actor's own "
        "process: no messages between processes; replay compute only) or auto (clock for replay, pool for "
        "real compute). Results do not depend on it")
    progress_s: PositiveFloat = Field(1.0, description="wall seconds between the driver's progress polls")
    start_timeout_s: PositiveFloat | None = Field(
        None, description="wall seconds each stage of Ray's start-up (and of the emulated servers' and worker "
        "pool's) may take on a busy host; a failed Ray start is retried once (default: the "
        "RAYTESTBED_RAY_START_TIMEOUT_S environment variable, else 180). Results do not depend on it")

    @field_validator("fast_forward", mode="after")
    @classmethod
    def _ff(cls, v):
        return v if isinstance(v, FastForwardConfig) else FastForwardConfig(enabled=bool(v))

    def workers_conflict(self) -> str | None:
        """Why ``workers`` and ``compute`` do not go together (None if they do): a trial file's check, and
        the emulator backend's when ``emu:real`` overrides the trial's ``compute``."""
        if self.workers == "clock" and self.compute == "real":
            return ("workers: clock runs replay compute only (real compute needs the worker pool: one process "
                    "per GPU, so passes run side by side); use workers: pool")
        return None

    @model_validator(mode="after")
    def _workers_in_clock_replay_only(self):
        if (why := self.workers_conflict()) is not None:
            raise ValueError(why)
        return self


class TrialConfig(_Strict):
    """A trial file: cluster + workload + policy + backend + seed."""

    name: str = "trial"
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seeds the workload, the policies and the backend")
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
    profiles: str | None = Field(
        None, description="a folder of model profiles (JSON, `raytestbed profile --out`) that replace the shipped "
        "ones of the same models in this trial: a path relative to the trial file, or the name of a shipped set "
        "in workloads/profiles/ (h100: measured with CUDA events on an H100)")

    @field_validator("policy_params")
    @classmethod
    def _no_nan(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """NaN is no policy parameter (infinity may be, e.g. ``reduction_bps: .inf``); ranges are the policy's."""
        def walk(x: Any, path: str) -> None:
            if isinstance(x, float) and math.isnan(x):
                raise ValueError(f"{path}: NaN is not a number")
            for k, y in (x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()):
                walk(y, f"{path}.{k}")
        for pol, params in v.items():
            walk(params, pol)
        return v


def validation_message(err: ValidationError, prefix: tuple[str, ...] = ()) -> tuple[str, str]:
    """(field path, reason) of a pydantic error's first problem; the reason quotes the value given."""
    e = err.errors()[0]
    loc = ".".join(str(x) for x in (*prefix, *e["loc"]))
    msg = e["msg"].removeprefix("Value error, ")
    value = e.get("input")
    if isinstance(value, (bool, int, float, str)) and e["type"] != "missing":
        shown = repr(value)
        msg += f", got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    return loc, msg


def _format_error(where: str, err: ValidationError, prefix: tuple[str, ...] = ()) -> str:
    loc, msg = validation_message(err, prefix)
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}: {loc or '(top level)'}: {msg}{more}"


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
    """A cluster reference from a trial: relative to the trial file, else a shipped cluster (``laptop``)."""
    return resolve(ref, "clusters", [base_dir], what="cluster")


class LoadedTrial(BaseModel):
    """A validated trial with its cluster resolved."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    trial: TrialConfig
    cluster_config: ClusterConfig
    path: Path | None = None
    profiles_dir: Path | None = None  #: the folder ``trial.profiles`` names, resolved (None: the shipped profiles)

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()

    @property
    def profiles(self) -> dict[str, ModelProfile]:
        """The trial's model profiles by model name: the shipped ones, replaced by ``profiles_dir``'s."""
        return model_profiles(self.profiles_dir)

    def resolved(self) -> dict[str, Any]:
        """The trial as a plain dict with the cluster inlined (written as ``config.yaml``)."""
        d = self.trial.model_dump(mode="json")
        d["cluster"] = self.cluster_config.model_dump(mode="json")
        if self.profiles_dir is not None:
            d["profiles"] = str(self.profiles_dir.resolve())
        return d


def load_trial(path: str | Path) -> LoadedTrial:
    """Load a trial YAML file, validate it and resolve its cluster.

    ``path`` is a file, or the name of a shipped trial (``demo``, ``workloads/trials/demo.yaml``:
    :func:`raytestbed.resources.resolve`).
    """
    p = Path(path)
    if not p.exists():
        p = resolve(path, "trials", what="trial file")
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
            raise ConfigError(_format_error(where, e, ("cluster",))) from None
    try:
        cluster_cfg.build()
    except ValueError as e:
        raise ConfigError(f"{where}: cluster: {e}") from None
    pdir = None
    if trial.profiles is not None:
        pdir = resolve_profile_dir(trial.profiles, base, f"{where}: profiles")
        model_profiles(pdir)  # a bad file is refused here, with its name
    return LoadedTrial(trial=trial, cluster_config=cluster_cfg, path=path, profiles_dir=pdir)
