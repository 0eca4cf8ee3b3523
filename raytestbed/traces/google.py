"""Google cluster-data 2011 per-job file (``workload.kind: google``), built into A-SRPT jobs.

Data (in the data folder): ``google-2011-jobs/google2011_job_arrivals.csv.gz``:
one row per job of the 29-day Borg trace, sorted by submit time, columns
``submit_s, job_id, scheduling_class, user_idx, logical_job_name_idx, run_s, end_event``.
``submit_s`` is on the raw trace clock (s; 600 s = 19:00 EDT, 1 May 2011); ``run_s``
(s) is last terminal event - first SCHEDULE, empty when either lies outside the trace
(1,658 of 668,088 rows); ``end_event`` is FINISH, KILL, FAIL, EVICT, LOST or empty.

It is a CPU cluster: it gives real arrivals and a recurrence key, not GPU demand.

* **Recurrence key**: the logical job name (Google: the same logical name = the same
  program run again) is the job's ``group`` (``n<logical_job_name_idx>``), the user its
  ``user`` (``u<user_idx>``) -- the A-SRPT predictor's group id and user id.
* **Run time**: ``run_s`` whatever the end event: a job that was killed or failed keeps its
  recorded run time (it occupied the cluster that long). Rows without ``run_s`` are
  dropped before the window is chosen (nothing to build iterations from);
  ``end_events`` keeps only some end events.
* **GPU demand** (the trace has none): every recurrence group draws its GPU count once,
  seeded, from the per-job GPU counts of a real GPU trace (``gpus_from``: ``aaic``, the
  AAIC 2018H2 file the A-SRPT trials use by default, 90.6 % single-GPU jobs; or ``philly``,
  86.7 %), restricted to counts that fit the trial's cluster. The draw depends only on the
  seed and the set of groups in the file, so a group has the same GPU count in every window
  and in the predictor history.
* **Everything else** -- model and (stages, replicas) per recurrence group, iterations
  n_i = run time / alpha~min_i, ``single_gpu_share``, ``arrival_scale`` / ``offered_load``,
  ``iteration_scale``, ``history_jobs`` -- is the A-SRPT trace recipe of
  :func:`raytestbed.traces.asrpt_workload.build_asrpt_jobs` (A-SRPT §V-A-1-b), unchanged.
* **Window**: ``jobs`` consecutive jobs from row ``start`` (an index into the rows kept, or
  ``random``) as for every A-SRPT trace; or ``start_s`` (the first job submitted at or after
  this trace-clock time) and/or ``span_s`` (every job submitted within this many seconds of
  the window's first job) instead.
* ``job.extra`` carries ``submit_hour`` (local hour of day, EDT, 0..23), ``sched_class``
  (Google scheduling class 0..3), ``end_event`` and ``trace_job_id`` -- features for the
  predictors (:mod:`raytestbed.predict.iterations`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import NonNegativeFloat, PositiveFloat, model_validator

from raytestbed.core.job import Job
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.aaic import read_aaic
from raytestbed.traces.asrpt_workload import NEEDS_G, AsrptTraceParams, TraceRow, build_asrpt_jobs
from raytestbed.traces.csvrows import csv_rows, parse_number
from raytestbed.traces.datadir import data_file
from raytestbed.traces.philly import read_philly
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload

FILE = "google-2011-jobs/google2011_job_arrivals.csv.gz"
COLUMNS = ("submit_s", "job_id", "scheduling_class", "user_idx", "logical_job_name_idx", "run_s", "end_event")
END_EVENTS = ("FINISH", "KILL", "FAIL", "EVICT", "LOST")
TRACE_START_S = 600.0  #: trace-clock second that is 19:00 EDT, 1 May 2011 (Google's schema document)
TRACE_START_HOUR = 19  #: local hour (EDT) at TRACE_START_S
#: GPU traces whose per-job GPU counts the groups draw from (file inside the data folder)
GPU_SOURCES = {"aaic": "aaic-gpu-workload/aaicwl-201807-201812.csv.gz", "philly": "philly-jobs-rfold/philly_trace.csv"}
_GPU_STREAM = 0x600613  #: keeps the per-group GPU draw apart from build_asrpt_jobs' stream


@dataclass(frozen=True, slots=True)
class GoogleJob:
    """One row of the per-job file; ``where`` names its file and line for error messages."""

    where: str
    arrival_s: float  #: submit time on the trace clock (s)
    job_id: int
    sched_class: int
    user: str  #: ``u<user_idx>``
    group: str  #: ``n<logical_job_name_idx>``
    run_s: float | None  #: None when the trace does not close the job
    end_event: str  #: "" when run_s is None


def local_hour(submit_s: float) -> int:
    """Local hour of day (EDT, 0..23) of a trace-clock time (s): 600 s is 19:00 EDT."""
    return int((TRACE_START_HOUR + (float(submit_s) - TRACE_START_S) / 3600.0) // 1) % 24


def read_google(path: Path | str) -> list[GoogleJob]:
    """Every row of the per-job file, in file order; a bad cell raises ``<file> line N: column 'x': reason``."""
    out: list[GoogleJob] = []
    for where, row in csv_rows(path, COLUMNS):
        submit = parse_number(row["submit_s"], where, "submit_s")
        job_id = parse_number(row["job_id"], where, "job_id", int)
        sc = parse_number(row["scheduling_class"], where, "scheduling_class", int)
        if sc > 3:
            raise TraceError(f"{where}: column 'scheduling_class': {row['scheduling_class']!r} is not 0..3")
        user = parse_number(row["user_idx"], where, "user_idx", int)
        name = parse_number(row["logical_job_name_idx"], where, "logical_job_name_idx", int)
        raw_run = (row["run_s"] or "").strip()
        end = (row["end_event"] or "").strip()
        if raw_run:
            run = parse_number(raw_run, where, "run_s")
            if end not in END_EVENTS:
                raise TraceError(f"{where}: column 'end_event': {end!r} is not one of {', '.join(END_EVENTS)}")
        else:
            run = None
            if end:
                raise TraceError(f"{where}: column 'run_s': missing value (end_event is {end!r})")
        out.append(GoogleJob(where, float(submit), job_id, sc, f"u{user}", f"n{name}", run, end))
    if not out:
        raise TraceError(f"{path}: no data rows")
    return out


@lru_cache(maxsize=4)
def _cached(path: str, mtime_ns: int) -> tuple[GoogleJob, ...]:
    rows = read_google(path)
    rows.sort(key=lambda r: r.arrival_s)  # stable; the file is sorted already
    return tuple(rows)


def google_jobs(starts: Iterable[Path] = (), override: str | Path | None = None) -> tuple[Path, tuple[GoogleJob, ...]]:
    """(file, its rows sorted by submit time), read once per file version."""
    path = data_file(FILE, starts, override)
    return path, _cached(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _gpu_pool(name: str, path: str, mtime_ns: int) -> tuple[int, ...]:
    if name == "aaic":
        rows = read_aaic(Path(path), "")
    else:
        rows = read_philly(Path(path))
    return tuple(r.gpus for r in rows)


def gpu_pool(name: str, max_gpus: int, starts: Iterable[Path] = ()) -> list[int]:
    """Per-job GPU counts of the GPU trace ``name`` that fit ``max_gpus`` GPUs."""
    if name not in GPU_SOURCES:
        raise ConfigError(f"gpus_from: {name!r} unknown (known: {', '.join(GPU_SOURCES)})")
    path = data_file(GPU_SOURCES[name], starts)
    pool = [g for g in _gpu_pool(name, str(path), path.stat().st_mtime_ns) if g <= max_gpus]
    if not pool:
        raise ConfigError(f"gpus_from: no job of {path} fits {max_gpus} GPUs")
    return pool


def group_gpus(groups: Sequence[str], pool: Sequence[int], seed: int) -> dict[str, int]:
    """GPU count of every group: one seeded draw from ``pool`` per group, groups in sorted order.

    Depends only on ``seed``, the set of ``groups`` and ``pool`` (not on any window).
    """
    names = sorted(set(groups), key=lambda g: (len(g), g))  # n2 before n10
    rng = np.random.default_rng([int(seed), _GPU_STREAM])
    idx = rng.integers(0, len(pool), size=len(names))
    arr = np.asarray(pool, dtype=np.int64)
    return dict(zip(names, (int(x) for x in arr[idx])))


def to_trace_rows(rows: Sequence[GoogleJob], gpus: dict[str, int],
                  end_events: Sequence[str] | None = None) -> list[TraceRow]:
    """The A-SRPT trace rows: rows with a run time (and a kept end event), GPUs by group, predictor features."""
    keep = set(end_events) if end_events is not None else None
    out = []
    for r in rows:
        if r.run_s is None or (keep is not None and r.end_event not in keep):
            continue
        out.append(TraceRow(r.where, r.arrival_s, gpus[r.group], r.run_s, r.user, r.group,
                            features=(("submit_hour", float(local_hour(r.arrival_s))),
                                      ("sched_class", float(r.sched_class)),
                                      ("end_event", r.end_event), ("trace_job_id", r.job_id))))
    return out


def google_trace_rows(seed: int, max_gpus: int, gpus_from: str = "aaic", end_events: Sequence[str] | None = None,
                      starts: Iterable[Path] = (), override: str | Path | None = None) -> list[TraceRow]:
    """All usable rows of the Google file as A-SRPT trace rows (GPU demand drawn per group with ``seed``)."""
    starts = list(starts)
    _, rows = google_jobs(starts, override)
    gpus = group_gpus([r.group for r in rows], gpu_pool(gpus_from, max_gpus, starts), seed)
    return to_trace_rows(rows, gpus, end_events)


class GoogleParams(AsrptTraceParams):
    gpus_from: Literal["aaic", "philly"] = "aaic"
    end_events: list[Literal["FINISH", "KILL", "FAIL", "EVICT", "LOST"]] | None = None
    start_s: NonNegativeFloat | None = None
    span_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _one_window(self) -> "GoogleParams":
        if self.start_s is not None and "start" in self.model_fields_set:
            raise ValueError("start_s: give either start (a row) or start_s (a trace time), not both")
        if self.span_s is not None and self.jobs is not None:
            raise ValueError("span_s: give either jobs (a count) or span_s (a time span), not both")
        return self


def window_rows(rows: Sequence[TraceRow], p: GoogleParams, where: str) -> AsrptTraceParams:
    """``p`` with ``start_s`` / ``span_s`` turned into the row index ``start`` and count ``jobs``."""
    if p.start_s is None and p.span_s is None:
        return p
    times = [r.arrival_s for r in rows]
    if p.start_s is not None:
        start = bisect.bisect_left(times, p.start_s)
        if start >= len(rows):
            raise ConfigError(f"{where}.start_s: no job submitted at or after {p.start_s:g} s "
                              f"(the last is at {times[-1]:g} s)")
    elif p.start == "random":
        raise ConfigError(f"{where}.span_s: needs start_s or a row start, not start: random")
    else:
        start = int(p.start)
    jobs = p.jobs
    if p.span_s is not None:
        if start >= len(rows):
            raise ConfigError(f"{where}.start: {start} is past the trace's {len(rows)} rows")
        jobs = bisect.bisect_left(times, times[start] + p.span_s) - start
    upd = {"start": start, "jobs": jobs}
    return p.model_copy(update=upd)


@register_workload("google", identical_servers=NEEDS_G)
def google_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """A-SRPT jobs from a window of the Google 2011 trace (see the module docstring)."""
    p: GoogleParams = parse_params(GoogleParams, params, ctx.where)  # type: ignore[assignment]
    rows = google_trace_rows(ctx.seed, ctx.cluster.total_gpus, p.gpus_from, p.end_events, [ctx.base_dir],
                             None if p.path is None else ctx.resolve(p.path))
    if not rows:
        raise ConfigError(f"{ctx.where}.end_events: no row of the trace is left")
    return build_asrpt_jobs(rows, window_rows(rows, p, ctx.where), ctx)
