"""The model registry: model files in ``workloads/models/`` (and ``$RAYTESTBED_MODELS_DIR``), found by name.

A model file is a Python file that defines one or more presets with :func:`model_preset`::

    from raytestbed.models import LayeredModel, model_preset

    @model_preset("my-mlp", "an MLP 128-256 -> 10, batch 8")
    def my_mlp(seed: int) -> LayeredModel:
        ...

Dropping such a file into ``workloads/models/`` (or into a folder named by the environment
variable ``RAYTESTBED_MODELS_DIR``, several separated by ``os.pathsep``) makes ``my-mlp`` known
to ``raytestbed profile`` and to the emulator's real-compute executors, which build it by name
(:func:`build_model`) in whichever process needs it. The files are read once per process, on
the first look-up, in name order; a name defined twice is an error naming both files.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from raytestbed.errors import ConfigError
from raytestbed.resources import package_dir

MODELS_DIR = package_dir("models")  #: the shipped model files (package data)
ENV_VAR = "RAYTESTBED_MODELS_DIR"


@dataclass(frozen=True)
class Preset:
    """A named model; ``build(seed)`` returns a fresh :class:`~raytestbed.models.LayeredModel`."""

    name: str
    description: str
    factory: Callable[[int], object]
    source: str = ""  #: the model file that defined it

    def build(self, seed: int = 0):
        return self.factory(seed)


_loading: list[Preset] | None = None  # the presets of the file being read


def model_preset(name: str, description: str):
    """Register the decorated ``fn(seed) -> LayeredModel`` under ``name`` (use in a model file)."""

    def deco(fn):
        if _loading is None:
            raise RuntimeError(f"model_preset({name!r}): only a model file read by the registry can define presets")
        _loading.append(Preset(name, description, fn))
        return fn

    return deco


def model_dirs() -> list[Path]:
    """The folders searched for model files: ``workloads/models/``, then ``$RAYTESTBED_MODELS_DIR``."""
    extra = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    return [MODELS_DIR, *extra]


class ModelRegistry(Mapping):
    """Name -> :class:`Preset` of every model file (read lazily, once)."""

    def __init__(self) -> None:
        self._presets: dict[str, Preset] | None = None
        self._dirs: list[Path] | None = None

    def _load(self) -> dict[str, Preset]:
        dirs = model_dirs()
        if self._presets is not None and dirs == self._dirs:
            return self._presets
        global _loading
        presets: dict[str, Preset] = {}
        for d in dirs:
            if not d.is_dir():
                continue
            for path in sorted(d.glob("*.py")):
                if path.name.startswith("_"):
                    continue
                _loading = []
                try:
                    _exec_file(path)
                    found = _loading
                finally:
                    _loading = None
                for p in found:
                    if p.name in presets:
                        raise ConfigError(f"{path}: model {p.name!r} is already defined in {presets[p.name].source}")
                    presets[p.name] = Preset(p.name, p.description, p.factory, str(path))
        self._presets, self._dirs = presets, dirs
        return presets

    def __getitem__(self, name: str) -> Preset:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


def _exec_file(path: Path) -> None:
    mod_name = f"raytestbed_model_files.{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot read this model file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - one line naming the file
        sys.modules.pop(mod_name, None)
        raise ConfigError(f"{path}: cannot load the model file: {type(e).__name__}: {e}") from None


PRESETS = ModelRegistry()


def build_model(preset: str, seed: int = 0):
    """Build a model by name; ValueError lists the known names."""
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r} (known: {', '.join(PRESETS)}; model files: "
                         f"{', '.join(str(d) for d in model_dirs())})")
    return PRESETS[preset].build(seed)
