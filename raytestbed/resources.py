"""The one resolver for the files raytestbed ships and the names a user gives.

**Shipped files** are package data (:mod:`raytestbed.bundled`, read through
:mod:`importlib.resources`), laid out as in the source tree:

=============  ===============================  ==============================
kind           folder                           holds
=============  ===============================  ==============================
``clusters``   ``cluster_configs/``             cluster files (``*.yaml``)
``trials``     ``workloads/trials/``            example trials (``*.yaml``)
``sweeps``     ``workloads/sweeps/``            example sweeps (``*.yaml``)
``models``     ``workloads/models/``            model files (``*.py``)
``profiles``   ``workloads/profiles/``          per-layer model profiles (``*.json``)
``traces``     ``workloads/traces/``            bundled trace slices (``*.csv``)
=============  ===============================  ==============================

**A name a user gives** (a trial file on the command line, a cluster named in a trial) is looked
up in this order, and the first file that exists wins:

1. the path as given: absolute, or relative to the user's folder (the folder of the file that
   names it, e.g. the trial's folder for its ``cluster:``; the current folder for a command-line
   argument), also with the kind's suffix added (``laptop`` -> ``laptop.yaml``);
2. the package's folder for that kind (``demo`` or ``demo.yaml`` -> ``workloads/trials/demo.yaml``);
3. the package's root, so that a path written as in the source tree
   (``workloads/trials/demo.yaml``) works from any folder once the package is installed.

The public data sets (traces too large to ship) are not package data: :mod:`raytestbed.data`.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from raytestbed.errors import ConfigError

#: kind -> (folder relative to the package root, suffix added to a bare name)
KINDS: dict[str, tuple[str, str]] = {
    "clusters": ("cluster_configs", ".yaml"),
    "trials": ("workloads/trials", ".yaml"),
    "sweeps": ("workloads/sweeps", ".yaml"),
    "models": ("workloads/models", ".py"),
    "profiles": ("workloads/profiles", ".json"),
    "traces": ("workloads/traces", ".csv"),
}
_TOP = ("workloads", "cluster_configs")  # the folders the build maps into raytestbed.bundled


@lru_cache(maxsize=1)
def package_root() -> Path:
    """The folder holding the shipped ``workloads/`` and ``cluster_configs/``.

    An installed wheel: ``raytestbed/bundled/``. A source checkout: the repository's root (the
    folder above the ``raytestbed`` package). The package must be installed as files on disk
    (pip's default), not zipped: model files are executed and Ray workers read them by path.
    """
    here = Path(str(importlib.resources.files("raytestbed.bundled")))
    for cand in (here, here.parents[1]):
        if all((cand / top).is_dir() for top in _TOP):
            return cand
    raise ConfigError(f"{here}: the package's files (workloads/, cluster_configs/) are missing; "
                      f"reinstall raytestbed")


def package_dir(kind: str) -> Path:
    """The package's folder of ``kind`` (a key of :data:`KINDS`)."""
    return package_root() / KINDS[kind][0]


def package_files(kind: str) -> list[Path]:
    """The shipped files of ``kind``, sorted by name."""
    folder, suffix = KINDS[kind]
    d = package_root() / folder
    return sorted(p for p in d.glob(f"*{suffix}") if p.is_file())


def candidates(ref: str | Path, kind: str, user_dirs: Iterable[Path] = ()) -> list[Path]:
    """Where :func:`resolve` looks for ``ref``, in order (see the module docstring)."""
    folder, suffix = KINDS[kind]
    p = Path(ref).expanduser()
    names = [p] if p.suffix == suffix or not suffix else [p, p.with_name(p.name + suffix)]
    if p.is_absolute():
        return names
    out: list[Path] = []
    for d in [*user_dirs] or [Path.cwd()]:
        out += [Path(d) / n for n in names]
    root = package_root()
    out += [root / folder / n for n in names]
    out += [root / n for n in names]
    seen: set[Path] = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def resolve(ref: str | Path, kind: str, user_dirs: Iterable[Path] = (), what: str | None = None) -> Path:
    """The file a user means by ``ref``: the first existing one of :func:`candidates`.

    Args:
        ref: a path or a name, as the user wrote it.
        kind: a key of :data:`KINDS` (which package folder to try, which suffix to add).
        user_dirs: the user's folders, in order (default: the current folder).
        what: how the error names the reference (default: the kind, singular).

    Raises:
        ConfigError: one line naming ``ref`` and the folders looked in.
    """
    user_dirs = list(user_dirs)
    for cand in candidates(ref, kind, user_dirs):
        if cand.is_file():
            return cand
    folder = KINDS[kind][0]
    where = [str(Path(ref).expanduser())] if Path(ref).expanduser().is_absolute() else \
        [*(str(d) for d in user_dirs or [Path.cwd()]), f"the package's {folder}/"]
    label = what or kind[:-1]
    known = ", ".join(p.stem for p in package_files(kind))
    raise ConfigError(f"{label} {str(ref)!r} not found (looked in {', '.join(where)}"
                      + (f"; shipped: {known})" if known else ")"))
