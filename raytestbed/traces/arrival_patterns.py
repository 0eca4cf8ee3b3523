"""Trace-shaped arrival times for synthetic workloads (the paper's setting allows "Poisson or another trace's arrivals").

GADGET's paper draws its arrivals from the *pattern* of the Google cluster trace (bursty, diurnal),
which is not available here. :func:`trace_shaped_arrivals` takes the submit times of ``n``
consecutive jobs of a real trace (sorted by submit time; the start row drawn from the seed) and
maps them linearly onto the arrival window ``[0, span)`` of the Poisson generator: the first of the
``n`` jobs arrives at 0 and the last at ``span * (n - 1) / n`` (where the Poisson process's last
arrival is expected). So the number of jobs and the window stay as with Poisson arrivals and only
the pattern (gaps, bursts, simultaneous submissions, day/night shape) comes from the trace.

Traces (``ARRIVAL_TRACES``; files inside the data folder, see :mod:`raytestbed.traces.datadir`):

* ``philly`` — ``philly-jobs-rfold/philly_trace.csv``, column ``arrival time (sec)``: every one
  of the 111,549 rows has it, whole seconds relative to the first job, already sorted; the easiest and most complete submit-time column of the local traces. Microsoft
  Philly, 2017-08 to 2017-12.
* ``aaic`` — ``aaic-gpu-workload/aaicwl-201807-201812.csv.gz``, column ``time_submit`` (UNIX s),
  124,425 jobs of AIST's AAIC GPU cluster, 2018-07 to 2018-12; sorted here.
* ``google`` — ``google-2011-jobs/google2011_job_arrivals.csv.gz``, column ``submit_s`` (s on the
  trace clock), all 668,088 jobs of the Google cluster-data 2011 ``job_events`` table (29 days of a
  Borg cell, May 2011): the arrival pattern GADGET's paper uses (§VI-1). Rows without a run time
  count too (only the submit time is used).

The rows are read by the trace's own loader (:func:`raytestbed.traces.philly.read_philly`,
:func:`raytestbed.traces.aaic.read_aaic`, :func:`raytestbed.traces.google.read_google`), so a bad row raises the same
:class:`~raytestbed.errors.TraceError` ``<file> line <N>: column 'c': reason`` as there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from raytestbed.errors import TraceError
from raytestbed.traces.aaic import read_aaic
from raytestbed.traces.asrpt_workload import TraceRow
from raytestbed.traces.datadir import data_file
from raytestbed.traces.google import FILE as GOOGLE_FILE, GoogleJob, read_google
from raytestbed.traces.philly import read_philly


@dataclass(frozen=True)
class ArrivalTrace:
    file: str  #: relative to the data folder
    column: str  #: the submit-time column (seconds), for reports
    read: Callable[[Path], Sequence[TraceRow | GoogleJob]]  #: the trace's loader (its rows' ``arrival_s``)


ARRIVAL_TRACES: dict[str, ArrivalTrace] = {
    "philly": ArrivalTrace("philly-jobs-rfold/philly_trace.csv", "arrival time (sec)", read_philly),
    "aaic": ArrivalTrace("aaic-gpu-workload/aaicwl-201807-201812.csv.gz", "time_submit",
                         lambda path: read_aaic(path, "")),
    "google": ArrivalTrace(GOOGLE_FILE, "submit_s", read_google),
}
ARRIVAL_KINDS = ("poisson", *ARRIVAL_TRACES)
_START_STREAM = 0x6ADE7  #: keeps the start-row draw apart from the job-parameter stream


def read_submit_times(path: Path | str, trace: ArrivalTrace) -> np.ndarray:
    """The submit times of ``path`` in seconds, sorted ascending (TraceError on a bad row)."""
    times = [r.arrival_s for r in trace.read(Path(path))]
    if not times:
        raise TraceError(f"{path}: no data rows")
    return np.sort(np.asarray(times, dtype=float), kind="stable")


@lru_cache(maxsize=8)
def _cached_times(path: str, mtime_ns: int, name: str) -> np.ndarray:
    t = read_submit_times(path, ARRIVAL_TRACES[name])
    t.setflags(write=False)
    return t


def submit_times(name: str, starts=()) -> tuple[Path, np.ndarray]:
    """(file, sorted submit times) of the arrival trace ``name`` (cached per file version)."""
    if name not in ARRIVAL_TRACES:
        raise TraceError(f"unknown arrival trace {name!r} (known: {', '.join(ARRIVAL_TRACES)})")
    path = data_file(ARRIVAL_TRACES[name].file, starts)
    return path, _cached_times(str(path), path.stat().st_mtime_ns, name)


def trace_shaped_arrivals(name: str, n: int, span: float, seed: int, starts=()) -> np.ndarray:
    """``n`` arrival times in ``[0, span)``: ``n`` consecutive submit times of trace ``name``, mapped linearly.

    The start row is drawn uniformly from the rows that leave ``n`` jobs, by a generator seeded with
    ``(seed, constant)`` (so the same seed gives the same arrivals). Raises TraceError naming the
    file if it has fewer than ``n`` rows or the ``n`` chosen jobs were all submitted at one instant.
    """
    path, times = submit_times(name, starts)
    if n > len(times):
        raise TraceError(f"{path}: {len(times)} submit times, {n} jobs asked for")
    rng = np.random.default_rng([int(seed), _START_STREAM])
    start = int(rng.integers(0, len(times) - n + 1))
    s = times[start:start + n]
    if n == 1:
        return np.zeros(1)
    width = s[-1] - s[0]
    if width <= 0:
        raise TraceError(f"{path}: the {n} jobs from sorted row {start} were all submitted at {s[0]:g} s; "
                         "no arrival pattern to map")
    return (s - s[0]) / width * (span * (n - 1) / n)
