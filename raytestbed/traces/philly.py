"""Microsoft Philly job list as processed by RFold (``workload.kind: philly``), built into A-SRPT jobs.

Data (in the data folder): ``philly-jobs-rfold/philly_trace.csv``:
``#job id, arrival time (sec), topology, shape, size, duration (sec)``; 111,549
jobs, arrival relative to the first job, ``size`` = GPUs, ``shape`` = GPUs per
server (e.g. ``8+8``).

Recurrence: the file keeps no user, VC or job name, so the only available key
is the request shape: group = (size, shape), user unknown (empty). A predictor
keyed on group/user therefore sees only the GPU demand; use ``aaic`` or
``dirlab`` for recurrence studies.

Parameters: those of :class:`~raytestbed.traces.asrpt_workload.AsrptTraceParams`.
"""

from __future__ import annotations

from pathlib import Path

from raytestbed.core.job import Job
from raytestbed.errors import TraceError
from raytestbed.traces.asrpt_workload import NEEDS_G, AsrptTraceParams, TraceRow, build_asrpt_jobs
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number
from raytestbed.traces.datadir import data_file
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload

FILE = "philly-jobs-rfold/philly_trace.csv"
COLUMNS = ("#job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)")


def read_philly(path: Path) -> list[TraceRow]:
    """Rows of the RFold Philly file in file (= arrival) order; bad rows raise TraceError."""
    rows: list[TraceRow] = []
    for where, rec in csv_rows(path, COLUMNS, exact_header=True):
        arrival = parse_number(rec["arrival time (sec)"], where, "arrival time (sec)", maximum=MAX_SECONDS)
        size = parse_number(rec["size"], where, "size", int, positive=True)
        dur = parse_number(rec["duration (sec)"], where, "duration (sec)", maximum=MAX_SECONDS)
        shape = rec["shape"].strip()
        if not shape:
            raise TraceError(f"{where}: column 'shape': missing value")
        rows.append(TraceRow(where, float(arrival), size, float(dur), "", f"{size}:{shape}"))
    return rows


@register_workload("philly", identical_servers=NEEDS_G)
def philly_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """A-SRPT jobs from the RFold Philly trace (see the module docstring)."""
    p: AsrptTraceParams = parse_params(AsrptTraceParams, params, ctx.where)  # type: ignore[assignment]
    path = data_file(FILE, [ctx.base_dir], None if p.path is None else ctx.resolve(p.path))
    rows = read_philly(path)
    rows.sort(key=lambda r: r.arrival_s)
    return build_asrpt_jobs(rows, p, ctx)
