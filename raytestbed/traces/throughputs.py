"""Finding a trial's throughput table (``timing.throughputs``; format: :mod:`raytestbed.core.gpu_types`).

``gavel`` and ``gavel-physical`` name the two tables of the Gavel throughput data set in the data
folder (:mod:`raytestbed.traces.datadir`): ``gavel-throughputs/simulation_throughputs.json`` (what
Gavel's simulator uses) and ``gavel-throughputs/physical_cluster_throughputs.json``. Anything else is
a path, relative to the trial file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from raytestbed.core.gpu_types import ThroughputTable
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.datadir import data_file

#: named tables of the data folder
NAMED_TABLES = {
    "gavel": "gavel-throughputs/simulation_throughputs.json",
    "gavel-physical": "gavel-throughputs/physical_cluster_throughputs.json",
}


@lru_cache(maxsize=8)
def _read(path: Path, mtime: float) -> ThroughputTable:
    try:
        return ThroughputTable.from_json(path)
    except ValueError as e:
        raise ConfigError(f"timing.throughputs: {e}") from None


def load_throughputs(ref: str, base_dir: Path) -> ThroughputTable:
    """The table ``ref`` names (a data set name or a path relative to ``base_dir``); one-line errors."""
    if ref in NAMED_TABLES:
        try:
            path = data_file(NAMED_TABLES[ref], [base_dir])
        except TraceError as e:
            raise ConfigError(f"timing.throughputs: {e}") from None
    else:
        path = Path(ref) if Path(ref).is_absolute() else base_dir / ref
        if not path.is_file():
            raise ConfigError(f"timing.throughputs: {path}: file not found (a path relative to the trial file, or "
                              f"one of {', '.join(NAMED_TABLES)})")
    path = path.resolve()
    return _read(path, path.stat().st_mtime)
