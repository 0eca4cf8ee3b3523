"""The data folder: where the public data sets are, and the look-up of one of their files.

A data set ``NAME`` is the folder ``NAME/`` of a data folder. The data folders searched, in order:

1. ``$RAYTESTBED_DATA_DIR``, if set: the only one (a site's shared copy, CI, tests);
2. otherwise the per-user folder, where ``raytestbed data fetch`` writes:
   ``$XDG_DATA_HOME/raytestbed/data`` (default ``~/.local/share/raytestbed/data``; on Windows
   ``%LOCALAPPDATA%\\raytestbed\\data``);
3. then, for developers, the first ``shared/data`` folder found walking up from the trial's folder,
   the current folder and the package's files (a data folder kept beside a source checkout; never
   written to).

A file is taken from the first folder that has it. A missing file is a one-line
:class:`~raytestbed.errors.TraceError` naming the file, its data set and the command that gets it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from raytestbed.data.catalogue import dataset_of
from raytestbed.errors import TraceError
from raytestbed.resources import package_root

ENV_VAR = "RAYTESTBED_DATA_DIR"


def user_data_dir() -> Path:
    """The per-user data folder (see the module docstring); it may not exist yet."""
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "raytestbed" / "data"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "raytestbed" / "data"


def fetch_dir() -> Path:
    """Where ``raytestbed data fetch`` writes: ``$RAYTESTBED_DATA_DIR`` if set, else :func:`user_data_dir`."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else user_data_dir()


def _shared_data(starts: Iterable[Path]) -> Path | None:
    """The developer fallback: the first ``shared/data`` folder above ``starts``, the current folder, the package."""
    seen: set[Path] = set()
    for start in [*starts, Path.cwd(), package_root()]:
        d = Path(start).resolve()
        for cand in (d, *d.parents):
            if cand in seen:
                break
            seen.add(cand)
            if (cand / "shared" / "data").is_dir():
                return cand / "shared" / "data"
    return None


def data_dirs(starts: Iterable[Path] = ()) -> list[Path]:
    """The data folders searched, in order (existing or not; see the module docstring)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [Path(env)]
    dev = _shared_data(starts)
    return [user_data_dir(), *([dev] if dev is not None else [])]


def find_data_dir(starts: Iterable[Path] = (), rel: str | Path | None = None) -> Path | None:
    """The first existing data folder (holding ``rel``, when given), or ``None``."""
    for d in data_dirs(starts):
        if d.is_dir() and (rel is None or (d / rel).exists()):
            return d
    return None


def data_file(rel: str, starts: Iterable[Path] = (), override: str | Path | None = None) -> Path:
    """Absolute path of a data file (``rel``: relative to a data folder); ``override`` (an explicit path) wins.

    Raises:
        TraceError: the file is missing (one line: the file, its data set, the command that gets it).
    """
    if override is not None:
        p = Path(override)
        if not p.is_file():
            raise TraceError(f"{p}: trace file not found")
        return p
    dirs = data_dirs(starts)
    for d in dirs:
        if (d / rel).is_file():
            return d / rel
    ds = dataset_of(rel)
    env = os.environ.get(ENV_VAR)
    looked = f"${ENV_VAR}={env}" if env else ", ".join(str(d) for d in dirs)
    if ds is None:
        raise TraceError(f"{rel}: data file not found (looked in {looked})")
    how = f"raytestbed data fetch {ds.name}" if ds.downloadable else \
        f"raytestbed data fetch {ds.name} --from DIR (a copy of the data folder; it has no public download)"
    raise TraceError(f"{rel}: data set {ds.name} not found (looked in {looked}); get it with: {how}")
