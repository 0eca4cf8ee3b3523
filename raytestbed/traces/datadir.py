"""Where the public traces live (the data folder: one subfolder per trace).

Resolution order:

1. ``$RAYTESTBED_DATA_DIR`` if set (it must be a folder);
2. the first ``shared/data`` folder found walking up from each start folder
   (the trial file's folder, then the current directory, then this package).

A loader asks :func:`data_file` for a path relative to the data folder (for
example ``aaic-gpu-workload/aaicwl-2017Q3.csv.gz``); a missing folder or file is
a one-line :class:`~raytestbed.errors.TraceError` naming the path it looked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from raytestbed.errors import TraceError

ENV_VAR = "RAYTESTBED_DATA_DIR"
_PACKAGE_DIR = Path(__file__).resolve().parent


def find_data_dir(starts: Iterable[Path] = ()) -> Path | None:
    """The data folder, or ``None`` if neither the variable nor a ``shared/data`` folder exists."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return p if p.is_dir() else None
    seen: set[Path] = set()
    for start in [*starts, Path.cwd(), _PACKAGE_DIR]:
        d = Path(start).resolve()
        for cand in (d, *d.parents):
            if cand in seen:
                break
            seen.add(cand)
            sd = cand / "shared" / "data"
            if sd.is_dir():
                return sd
    return None


def data_file(rel: str, starts: Iterable[Path] = (), override: str | Path | None = None) -> Path:
    """Absolute path of a data file; ``override`` (an explicit path) wins when given.

    Raises:
        TraceError: if the data folder or the file is missing (one line, with the path).
    """
    if override is not None:
        p = Path(override)
        if not p.is_file():
            raise TraceError(f"{p}: trace file not found")
        return p
    d = find_data_dir(starts)
    if d is None:
        env = os.environ.get(ENV_VAR)
        where = f"${ENV_VAR}={env} is not a folder" if env else f"no shared/data folder above {Path.cwd()}"
        raise TraceError(f"{rel}: trace data not found ({where}; set ${ENV_VAR})")
    p = d / rel
    if not p.is_file():
        raise TraceError(f"{p}: trace file not found")
    return p
