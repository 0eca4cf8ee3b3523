"""Per-layer model profiles: THE profile file format of raytestbed.

A :class:`ModelProfile` lists the layers of one model in execution order, each
with its forward and backward time for one mini-batch, the activation bytes that
would cross a pipeline cut placed right after it, and its parameter bytes. The
simulator's pipeline planner and timing models read these files; the importer
``scripts/import_pipedream_profiles.py`` and the on-machine profiler write them.

Units: seconds for times, bytes for sizes, all for ONE mini-batch of
``batch_size`` samples on ONE device.

File format (JSON, ``format_version`` 1, keys in this order)::

    {
      "format_version": 1,
      "model": "vgg16",
      "batch_size": 128,
      "source": "pipedream graph.txt (...)",
      "device": "unknown GPU",
      "measurement": {...},            (optional: how the profiler measured)
      "layers": [
        {"name": "...", "fwd_s": 0.0022, "bwd_s": 0.0028, "out_bytes": 2.0e8, "param_bytes": 0.0},
        ...
      ]
    }

Every layer field is a finite number >= 0 and the last layer's ``out_bytes`` is 0
(nothing leaves the model's last layer towards another stage). Invalid input
raises :class:`raytestbed.errors.ConfigError` with a one-line message naming the
file, the field and the layer index.

Layer lists that come from a DAG (skip connections, multi-branch cells) are
linearised with :func:`linearize_dag`, which turns per-node output sizes into
exact cut sizes for the chosen order.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from raytestbed.core.job import StageProfile
from raytestbed.errors import ConfigError
from raytestbed.resources import package_dir

FORMAT_VERSION = 1  #: version written to and required in every profile file

_LAYER_KEYS = ("name", "fwd_s", "bwd_s", "out_bytes", "param_bytes")
_TOP_KEYS = ("format_version", "model", "batch_size", "source", "device", "layers")
_OPTIONAL_TOP_KEYS = ("measurement",)  #: may be present; written after ``device`` when set
_NUM_FIELDS = ("fwd_s", "bwd_s", "out_bytes", "param_bytes")


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_fields(d: Mapping, keys: tuple[str, ...], where: str, optional: tuple[str, ...] = ()) -> None:
    """ConfigError ``where: missing field 'k'`` / ``where: unknown field(s) ...`` unless ``d`` has exactly
    ``keys`` (and any of ``optional``)."""
    for k in keys:
        if k not in d:
            raise ConfigError(f"{where}: missing field {k!r}")
    extra = sorted(set(d) - set(keys) - set(optional))
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(map(repr, extra))}")


def _check_nonneg(v: object, what: str) -> float:
    """Return ``v`` as float if it is a finite number >= 0, else raise ConfigError."""
    if not _is_number(v) or not math.isfinite(float(v)) or float(v) < 0.0:  # type: ignore[arg-type]
        raise ConfigError(f"{what} must be a finite number >= 0, got {v!r}")
    return float(v)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class LayerProfile:
    """Costs of one layer for one mini-batch on one device.

    Attributes:
        name: layer label (e.g. ``"node12 Conv2d(128, 256, ...)"``); informational.
        fwd_s: forward time of one mini-batch, seconds.
        bwd_s: backward time of one mini-batch, seconds.
        out_bytes: bytes of activations crossing a cut placed right AFTER this
            layer (one mini-batch); 0 for the last layer.
        param_bytes: trainable parameter bytes of this layer.
    """

    name: str
    fwd_s: float
    bwd_s: float
    out_bytes: float
    param_bytes: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ConfigError(f"LayerProfile.name must be a string, got {self.name!r}")
        for f in _NUM_FIELDS:
            _check_nonneg(getattr(self, f), f"layer {self.name!r}: {f}")

    @property
    def compute_s(self) -> float:
        """Forward plus backward time, seconds."""
        return self.fwd_s + self.bwd_s

    def to_dict(self) -> dict[str, Any]:
        """The layer as a JSON-ready dict with keys in file order."""
        return {k: getattr(self, k) for k in _LAYER_KEYS}


@dataclass(frozen=True)
class ModelProfile:
    """Per-layer profile of one model at one batch size on one device.

    Attributes:
        model: model name, e.g. ``"vgg16"`` (key in :func:`load_profile_dir`).
        batch_size: samples per mini-batch the times and sizes refer to.
        source: where the numbers came from and how anything was inferred.
        device: what they were measured on, e.g. ``"unknown GPU"``.
        layers: the layers in execution order (at least one).
        measurement: how the times were measured, when the project's profiler made them (optional
            JSON object): method, device, torch version, threads, warm-up and repeats, the spread
            (interquartile range / median) of the iteration and of every layer's forward and
            backward, the host's load per core before and after, ``noisy`` and ``warnings``
            (:mod:`raytestbed.profile.profiler`).
    """

    model: str
    batch_size: int
    source: str
    device: str
    layers: tuple[LayerProfile, ...]
    measurement: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        p = f"profile {self.model!r}"
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"profile: model must be a non-empty string, got {self.model!r}")
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise ConfigError(f"{p}: batch_size must be an integer >= 1, got {self.batch_size!r}")
        for f in ("source", "device"):
            if not isinstance(getattr(self, f), str):
                raise ConfigError(f"{p}: {f} must be a string, got {getattr(self, f)!r}")
        if self.measurement is not None and not isinstance(self.measurement, Mapping):
            raise ConfigError(f"{p}: measurement must be a JSON object, got {type(self.measurement).__name__}")
        if not self.layers:
            raise ConfigError(f"{p}: layers must not be empty")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, LayerProfile):
                raise ConfigError(f"{p}: layers[{i}] must be a LayerProfile, got {type(layer).__name__}")
        last = len(self.layers) - 1
        if self.layers[last].out_bytes != 0.0:
            raise ConfigError(
                f"{p}: layers[{last}].out_bytes must be 0 for the last layer, "
                f"got {self.layers[last].out_bytes!r}"
            )

    # ------------------------------------------------------------------ totals
    @property
    def num_layers(self) -> int:
        """Number of layers."""
        return len(self.layers)

    @property
    def total_fwd_s(self) -> float:
        """Sum of forward times, seconds."""
        return math.fsum(lay.fwd_s for lay in self.layers)

    @property
    def total_bwd_s(self) -> float:
        """Sum of backward times, seconds."""
        return math.fsum(lay.bwd_s for lay in self.layers)

    @property
    def total_compute_s(self) -> float:
        """Sum of forward plus backward times of all layers, seconds."""
        return math.fsum(lay.fwd_s + lay.bwd_s for lay in self.layers)

    @property
    def total_param_bytes(self) -> float:
        """Sum of parameter bytes of all layers."""
        return math.fsum(lay.param_bytes for lay in self.layers)

    # ----------------------------------------------------------------- stages
    def _check_boundaries(self, boundaries: Sequence[int]) -> list[int]:
        p = f"profile {self.model!r}"
        b = list(boundaries)
        if not b:
            raise ConfigError(f"{p}: boundaries must not be empty")
        for i, v in enumerate(b):
            if not isinstance(v, int) or isinstance(v, bool):
                raise ConfigError(f"{p}: boundaries[{i}] must be an integer, got {v!r}")
        if b[0] != 0:
            raise ConfigError(f"{p}: boundaries[0] must be 0, got {b[0]}")
        for i in range(1, len(b)):
            if b[i] <= b[i - 1]:
                raise ConfigError(
                    f"{p}: boundaries must be strictly increasing, "
                    f"boundaries[{i}]={b[i]} <= boundaries[{i - 1}]={b[i - 1]}"
                )
        if b[-1] >= self.num_layers:
            raise ConfigError(
                f"{p}: boundaries[{len(b) - 1}]={b[-1]} must be < num_layers={self.num_layers}"
            )
        return b

    def stage_profiles(self, boundaries: Sequence[int]) -> list[StageProfile]:
        """Per-stage costs of a pipeline split.

        Args:
            boundaries: start layer index of each stage; the first must be 0, they
                must be strictly increasing and < ``num_layers``.

        Returns:
            One :class:`StageProfile` per stage: fwd/bwd seconds and parameter
            bytes summed over the stage's layers, ``out_bytes`` = the stage's last
            layer's ``out_bytes`` (0 for the last stage).

        Raises:
            ConfigError: if the boundaries are invalid.
        """
        b = self._check_boundaries(boundaries)
        ends = b[1:] + [self.num_layers]
        out: list[StageProfile] = []
        for start, end in zip(b, ends):
            chunk = self.layers[start:end]
            out.append(
                StageProfile(
                    fwd_s=math.fsum(lay.fwd_s for lay in chunk),
                    bwd_s=math.fsum(lay.bwd_s for lay in chunk),
                    out_bytes=0.0 if end == self.num_layers else chunk[-1].out_bytes,
                    param_bytes=math.fsum(lay.param_bytes for lay in chunk),
                )
            )
        return out

    def even_split(self, num_stages: int) -> list[int]:
        """Boundaries of the most compute-balanced split into ``num_stages`` stages.

        Minimises the largest stage compute (fwd + bwd seconds) over all splits into
        ``num_stages`` contiguous non-empty layer ranges. Exact dynamic programme,
        deterministic. Among splits with the optimal bottleneck it picks the one
        with the least sum of squared stage computes (ties: earliest boundary).
        Cut sizes (``out_bytes``) are not considered.

        Raises:
            ConfigError: unless ``1 <= num_stages <= num_layers``.
        """
        n = self.num_layers
        if not isinstance(num_stages, int) or isinstance(num_stages, bool) or not 1 <= num_stages <= n:
            raise ConfigError(
                f"profile {self.model!r}: num_stages must be an integer in [1, {n}], got {num_stages!r}"
            )
        return _min_max_partition([lay.fwd_s + lay.bwd_s for lay in self.layers], num_stages)

    # ------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with keys in file order (``format_version`` first)."""
        return {
            "format_version": FORMAT_VERSION,
            "model": self.model,
            "batch_size": self.batch_size,
            "source": self.source,
            "device": self.device,
            **({"measurement": dict(self.measurement)} if self.measurement is not None else {}),
            "layers": [lay.to_dict() for lay in self.layers],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> ModelProfile:
        """Build and validate a profile from :meth:`to_dict` output.

        Args:
            d: the parsed JSON object.
            where: prefix for error messages, e.g. the file path.

        Raises:
            ConfigError: one-line message naming ``where``, the field and, for
                layer fields, the layer index.
        """
        w = where or "profile"
        if not isinstance(d, Mapping):
            raise ConfigError(f"{w}: profile must be a JSON object, got {type(d).__name__}")
        _check_fields(d, _TOP_KEYS, w, optional=_OPTIONAL_TOP_KEYS)
        if d["format_version"] != FORMAT_VERSION or isinstance(d["format_version"], bool):
            raise ConfigError(
                f"{w}: format_version must be {FORMAT_VERSION}, got {d['format_version']!r}"
            )
        model = d["model"]
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{w}: model must be a non-empty string, got {model!r}")
        bs = d["batch_size"]
        if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
            raise ConfigError(f"{w}: batch_size must be an integer >= 1, got {bs!r}")
        for k in ("source", "device"):
            if not isinstance(d[k], str):
                raise ConfigError(f"{w}: {k} must be a string, got {d[k]!r}")
        measurement = d.get("measurement")
        if measurement is not None and not isinstance(measurement, Mapping):
            raise ConfigError(f"{w}: measurement must be a JSON object, got {type(measurement).__name__}")
        raw_layers = d["layers"]
        if not isinstance(raw_layers, list) or not raw_layers:
            raise ConfigError(f"{w}: layers must be a non-empty list")
        layers: list[LayerProfile] = []
        for i, ld in enumerate(raw_layers):
            lw = f"{w}: layers[{i}]"
            if not isinstance(ld, Mapping):
                raise ConfigError(f"{lw} must be a JSON object, got {type(ld).__name__}")
            _check_fields(ld, _LAYER_KEYS, lw)
            if not isinstance(ld["name"], str):
                raise ConfigError(f"{lw}.name must be a string, got {ld['name']!r}")
            vals = {k: _check_nonneg(ld[k], f"{lw}.{k}") for k in _NUM_FIELDS}
            layers.append(LayerProfile(name=ld["name"], **vals))
        last = len(layers) - 1
        if layers[last].out_bytes != 0.0:
            raise ConfigError(
                f"{w}: layers[{last}].out_bytes must be 0 for the last layer, got {layers[last].out_bytes!r}"
            )
        return cls(model=model, batch_size=bs, source=d["source"], device=d["device"], layers=tuple(layers),
                   measurement=measurement)

    def to_json(self) -> str:
        """The file text: stable key order, one layer per line, trailing newline."""
        d = self.to_dict()
        head = ",\n".join(
            f"  {json.dumps(k)}: {json.dumps(d[k], ensure_ascii=False)}"
            for k in (*_TOP_KEYS, *_OPTIONAL_TOP_KEYS) if k != "layers" and k in d
        )
        rows = ",\n".join("    " + json.dumps(ld, ensure_ascii=False) for ld in d["layers"])
        return "{\n" + head + ',\n  "layers": [\n' + rows + "\n  ]\n}\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the profile as JSON atomically (temp file in the same folder + ``os.replace``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; profiles are shared data
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.to_json())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ModelProfile:
        """Read and validate a profile file.

        Raises:
            ConfigError: if the file is missing, not JSON, or invalid.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: profile file not found") from None
        except OSError as e:
            raise ConfigError(f"{path}: cannot read profile file ({e.strerror})") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        return cls.from_dict(d, where=str(path))


# ---------------------------------------------------------------------- helpers
def _min_max_partition(costs: Sequence[float], k: int) -> list[int]:
    """Start indices of ``k`` contiguous non-empty parts minimising the max part sum.

    Two exact dynamic programmes over prefix sums ``P``:

    1. the optimal bottleneck ``B*``: ``dp[s][i]`` = best max part sum for the first
       ``i`` items in ``s`` parts; for fixed ``i``, ``dp[s-1][j]`` is non-decreasing
       and ``P[i] - P[j]`` non-increasing in ``j``, so the best ``j`` is found by
       bisection at their crossing (O(k n log n));
    2. tie-break among all splits with every part <= ``B*``: minimise the sum of
       squared part sums (spreads the non-bottleneck stages evenly), ties to the
       smallest boundary.

    Part sums are always computed as ``P[i] - P[j]`` so that every comparison is
    made on the same floating-point values.
    """
    n = len(costs)
    pre_l = [0.0]
    for c in costs:
        pre_l.append(pre_l[-1] + c)
    inf = math.inf
    # --- 1. optimal bottleneck
    prev = [inf] + pre_l[1:]  # one part
    for s in range(2, k + 1):
        cur = [inf] * (n + 1)
        for i in range(s, n - (k - s) + 1):
            lo, hi = s - 1, i - 1  # last part = items j..i-1, j in [lo, hi]
            # smallest j in [lo, hi] with prev[j] >= P[i] - P[j] (hi + 1 if none)
            a, b = lo, hi + 1
            while a < b:
                mid = (a + b) // 2
                if prev[mid] >= pre_l[i] - pre_l[mid]:
                    b = mid
                else:
                    a = mid + 1
            best = prev[a] if a <= hi else inf
            if a - 1 >= lo:
                best = min(best, pre_l[i] - pre_l[a - 1])
            cur[i] = best
        prev = cur
    bottleneck = prev[n]
    # --- 2. least sum of squares among splits whose parts are all <= bottleneck
    pre = np.asarray(pre_l, dtype=float)
    ss = np.full(n + 1, np.inf)
    ss[1:] = np.where(pre[1:] - pre[0] <= bottleneck, (pre[1:] - pre[0]) ** 2, np.inf)
    choice: list[np.ndarray] = []
    for s in range(2, k + 1):
        cur_ss = np.full(n + 1, np.inf)
        arg = np.zeros(n + 1, dtype=np.int64)
        for i in range(s, n - (k - s) + 1):
            js = np.arange(s - 1, i)
            part = pre[i] - pre[js]
            cand = np.where(part <= bottleneck, ss[js] + part * part, np.inf)
            m = int(np.argmin(cand))  # first minimum: smallest j on ties
            cur_ss[i], arg[i] = cand[m], js[m]
        choice.append(arg)
        ss = cur_ss
    bounds = [0] * k
    i = n
    for s in range(k, 1, -1):
        i = int(choice[s - 2][i])
        bounds[s - 1] = i
    return bounds


def linearize_dag(nodes: Sequence[LayerProfile], edges: Iterable[tuple[str, str]]) -> tuple[LayerProfile, ...]:
    """Order a layer DAG and replace per-node output sizes by exact cut sizes.

    Args:
        nodes: one entry per graph node with a unique ``name``; here ``out_bytes``
            means the bytes of that node's OWN output (one mini-batch). Ties in the
            topological order are broken by position in this sequence.
        edges: ``(producer_name, consumer_name)`` pairs; duplicates are ignored.

    Returns:
        The nodes in a deterministic topological order (Kahn's algorithm, ready
        node that comes first in ``nodes`` first), with ``out_bytes`` of the layer
        at position ``p`` = sum of the own output sizes of nodes at positions
        ``<= p`` that feed a node at position ``> p``; the last layer gets 0.

    Raises:
        ConfigError: on duplicate names, edges naming unknown nodes, self-loops
            or cycles.
    """
    index: dict[str, int] = {}
    for i, nd in enumerate(nodes):
        if nd.name in index:
            raise ConfigError(f"graph: duplicate node name {nd.name!r}")
        index[nd.name] = i
    succ: list[set[int]] = [set() for _ in nodes]
    for a, b in edges:
        if a not in index or b not in index:
            missing = a if a not in index else b
            raise ConfigError(f"graph: edge {a!r} -> {b!r} names unknown node {missing!r}")
        if a == b:
            raise ConfigError(f"graph: self-loop on node {a!r}")
        succ[index[a]].add(index[b])
    indeg = [0] * len(nodes)
    for s in succ:
        for t in s:
            indeg[t] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for t in succ[i]:
            indeg[t] -= 1
            if indeg[t] == 0:
                heapq.heappush(ready, t)
    if len(order) != len(nodes):
        stuck = sorted(nodes[i].name for i, d in enumerate(indeg) if d > 0)[:3]
        raise ConfigError(f"graph: cycle through node(s) {', '.join(map(repr, stuck))}")
    pos = {node_i: p for p, node_i in enumerate(order)}
    # node at position p contributes its output to cuts after positions p .. last_consumer-1
    delta = [0.0] * (len(order) + 1)
    for i, s in enumerate(succ):
        if s:
            last = max(pos[t] for t in s)
            delta[pos[i]] += nodes[i].out_bytes
            delta[last] -= nodes[i].out_bytes
    out: list[LayerProfile] = []
    running = 0.0
    for p, i in enumerate(order):
        running += delta[p]
        cut = 0.0 if p == len(order) - 1 else max(running, 0.0)
        out.append(replace(nodes[i], out_bytes=cut))
    return tuple(out)


def load_profile_dir(path: str | os.PathLike[str]) -> dict[str, ModelProfile]:
    """Load every ``*.json`` profile in a folder, keyed by model name (sorted by file name).

    Raises:
        ConfigError: if the folder is missing, a file is invalid, or two files
            declare the same model.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: profile folder not found")
    out: dict[str, ModelProfile] = {}
    seen: dict[str, Path] = {}
    for f in sorted(folder.glob("*.json")):
        prof = ModelProfile.load(f)
        if prof.model in out:
            raise ConfigError(f"{f}: model {prof.model!r} already defined in {seen[prof.model]}")
        out[prof.model] = prof
        seen[prof.model] = f
    return out


def default_profile_dir() -> Path:
    """The shipped profiles (``workloads/profiles/``, package data: :mod:`raytestbed.resources`)."""
    return package_dir("profiles")


@lru_cache(maxsize=1)
def _cached_default_profiles() -> Mapping[str, ModelProfile]:
    return load_profile_dir(default_profile_dir())


def default_profiles() -> dict[str, ModelProfile]:
    """The shipped profiles keyed by model name (loaded once; a fresh dict each call)."""
    return dict(_cached_default_profiles())


@lru_cache(maxsize=8)
def _cached_profile_dir(folder: str) -> Mapping[str, ModelProfile]:
    return load_profile_dir(folder)


def model_profiles(folder: str | os.PathLike[str] | None = None) -> dict[str, ModelProfile]:
    """The shipped profiles, each replaced by ``folder``'s profile of the same model (None: the shipped
    ones); a fresh dict each call."""
    out = default_profiles()
    if folder is not None:
        out.update(_cached_profile_dir(str(folder)))
    return out


def resolve_profile_dir(ref: str, base: Path, where: str) -> Path:
    """The profile folder a trial names (its ``profiles:``): ``ref`` as a path (relative to ``base``, the
    trial's folder), else a shipped set of that name in ``workloads/profiles/`` (e.g. ``h100``).

    Raises:
        ConfigError: one line naming ``ref``, where it was looked for and the shipped sets.
    """
    path = Path(ref).expanduser()
    for cand in (path if path.is_absolute() else base / path, default_profile_dir() / ref):
        if cand.is_dir():
            return cand
    shipped = sorted(p.name for p in default_profile_dir().iterdir() if p.is_dir() and any(p.glob("*.json")))
    raise ConfigError(f"{where}: profile folder {ref!r} not found (looked in {base} and the package's "
                      f"workloads/profiles/; shipped sets: {', '.join(shipped) or 'none'})")


def clear_default_profiles_cache() -> None:
    """Forget the cached profiles (e.g. after regenerating the files)."""
    _cached_default_profiles.cache_clear()
    _cached_profile_dir.cache_clear()
