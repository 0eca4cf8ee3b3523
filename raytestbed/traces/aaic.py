"""AIST AAIC GPU-cluster job log (``workload.kind: aaic``), built into A-SRPT jobs.

Data: ``aaic-gpu-workload/`` in the data folder (:mod:`raytestbed.traces.datadir`): one CSV per period,
columns ``id, user, group, queue, nodes, gpus, walltime_req, termcode,
time_submit, time_start, time_end, waittime, walltime``; a job's GPUs are
``nodes x gpus``, its run time ``walltime`` (s), its arrival ``time_submit``
(UNIX s). IDs are unique only within one file, so with several ``files`` users
and groups are prefixed by the file.

Recurrence (the A-SRPT predictor's *group id*): AAIC has no job name or
command hash. ``recurrence: signature`` (default) keys a group by the request
signature (user, queue, nodes, gpus, walltime_req), the closest recurrence key
the trace offers; ``user`` or ``group`` (AAIC's organisation column) are
coarser alternatives. The job's user id is the AAIC user.

Parameters: those of :class:`~raytestbed.traces.asrpt_workload.AsrptTraceParams`
plus ``files`` (file names inside the data folder; default the 2018H2 file, one
consistent ID set, 124,425 jobs), ``recurrence`` and ``termcodes`` (keep only
these termination codes; default all).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field

from raytestbed.core.job import Job
from raytestbed.errors import TraceError
from raytestbed.traces.asrpt_workload import NEEDS_G, AsrptTraceParams, TraceRow, build_asrpt_jobs
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number
from raytestbed.traces.datadir import data_file
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload

FOLDER = "aaic-gpu-workload"
DEFAULT_FILES = ["aaicwl-201807-201812.csv.gz"]
COLUMNS = ("id", "user", "group", "queue", "nodes", "gpus", "walltime_req", "termcode", "time_submit", "walltime")


class AaicParams(AsrptTraceParams):
    files: list[str] = Field(default_factory=lambda: list(DEFAULT_FILES), min_length=1)
    recurrence: Literal["signature", "user", "group"] = "signature"
    termcodes: list[int] | None = None


def read_aaic(path: Path, tag: str, recurrence: str = "signature",
              termcodes: list[int] | None = None) -> list[TraceRow]:
    """Rows of one AAIC file (arrival = UNIX submit time, not yet shifted); bad rows raise TraceError.

    Parsed once per process and file version (path, size, modification time): the cells of a sweep
    that a Ray worker runs one after the other share the parse (the rows are frozen).
    """
    st = Path(path).stat()
    return list(_read_aaic(str(path), st.st_size, st.st_mtime_ns, tag, recurrence,
                           None if termcodes is None else tuple(termcodes)))


@functools.lru_cache(maxsize=8)
def _read_aaic(path: str, size: int, mtime_ns: int, tag: str, recurrence: str,
               termcodes: tuple[int, ...] | None) -> tuple[TraceRow, ...]:
    rows: list[TraceRow] = []
    for where, row in csv_rows(path, COLUMNS, skipinitialspace=True):
        num = {c: parse_number(row[c], where, c, int) for c in
               ("user", "group", "queue", "nodes", "gpus", "walltime_req", "termcode")}
        num["time_submit"] = parse_number(row["time_submit"], where, "time_submit", int, maximum=MAX_SECONDS)
        dur = parse_number(row["walltime"], where, "walltime", maximum=MAX_SECONDS)
        if termcodes is not None and num["termcode"] not in termcodes:
            continue
        gpus = num["nodes"] * num["gpus"]
        if gpus < 1:
            raise TraceError(f"{where}: column 'gpus': nodes x gpus must be >= 1")
        user = f"{tag}u{num['user']}"
        if recurrence == "signature":
            group = f"{user}:q{num['queue']}:n{num['nodes']}:g{num['gpus']}:w{num['walltime_req']}"
        elif recurrence == "user":
            group = user
        else:
            group = f"{tag}g{num['group']}"
        rows.append(TraceRow(where, float(num["time_submit"]), gpus, float(dur), user, group))
    return tuple(rows)


@register_workload("aaic", identical_servers=NEEDS_G)
def aaic_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """A-SRPT jobs from the AAIC log (see the module docstring)."""
    p: AaicParams = parse_params(AaicParams, params, ctx.where)  # type: ignore[assignment]
    paths = [data_file(f"{FOLDER}/{name}", [ctx.base_dir]) for name in p.files] if p.path is None \
        else [data_file("", override=ctx.resolve(p.path))]
    rows: list[TraceRow] = []
    for i, path in enumerate(paths):
        tag = f"f{i}:" if len(paths) > 1 else ""
        rows.extend(read_aaic(path, tag, p.recurrence, p.termcodes))
    rows.sort(key=lambda r: r.arrival_s)  # stable: file order among equal submit times
    return build_asrpt_jobs(rows, p, ctx)
