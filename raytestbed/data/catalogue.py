"""The data-set catalogue: ``catalogue.json`` in this package, read through :mod:`importlib.resources`.

Each data set is a folder of the data folder (named as the data set) holding its files at their
``path``; each file has the URL it is fetched from (the origin's raw file at a fixed commit, or
``null`` when the origin publishes no such file, e.g. a file derived from a larger table), its size
in bytes and its sha256. To add a data set: add an entry with every file's URL, size and sha256,
and name it in the loader's error through :func:`raytestbed.data.store.data_file`.
"""

from __future__ import annotations

import importlib.resources
import json
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from raytestbed.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataFile(_Strict):
    """One file of a data set."""

    path: str = Field(description="path inside the data set's folder, '/'-separated")
    url: str | None = Field(description="where `fetch` downloads it from; None: no public download")
    size: int = Field(ge=0, description="bytes")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Dataset(_Strict):
    """A public data set: a folder of files in the data folder."""

    name: str
    title: str
    origin: str
    licence: str
    used_by: str
    files: tuple[DataFile, ...]

    @property
    def size(self) -> int:
        """Bytes, all files."""
        return sum(f.size for f in self.files)

    @property
    def downloadable(self) -> bool:
        """Whether every file has a public URL (else only ``fetch --from`` a copy gets it)."""
        return all(f.url for f in self.files)


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Dataset]:
    """Every data set the loaders know, by name (sorted)."""
    raw = json.loads(importlib.resources.files("raytestbed.data").joinpath("catalogue.json").read_text("utf-8"))
    return {name: Dataset(name=name, **d) for name, d in sorted(raw["datasets"].items())}


def dataset(name: str) -> Dataset:
    """The data set ``name``; ConfigError naming the known ones."""
    cat = catalogue()
    if name not in cat:
        raise ConfigError(f"unknown data set {name!r} (known: {', '.join(cat)}; `raytestbed data list`)")
    return cat[name]


def dataset_of(rel: str) -> Dataset | None:
    """The data set a data-folder path (``philly-jobs-rfold/philly_trace.csv``) belongs to, if any."""
    return catalogue().get(rel.replace("\\", "/").split("/", 1)[0])
