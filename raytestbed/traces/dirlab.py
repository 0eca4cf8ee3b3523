"""Helios / Philly 15,000-job slices with user ids (``workload.kind: dirlab``), built into A-SRPT jobs.

Data (in the data folder): ``dirlab-helios-philly-15k/{helios,philly}_data_training.csv``:
``u_id, user, gpu_num, cpu_num, node_num, interval,
run_time, wall_time, new_status``. The submit time is rebuilt as the cumulative
sum of ``interval`` in file order; the run time is ``run_time`` (s).

Jobs with ``gpu_num = 0`` (28% of Helios: CPU-only jobs) are not GPU training
jobs and are skipped. Recurrence: group = (user, gpu_num, cpu_num, node_num),
a request-signature key; user = the renumbered ``user``.

Parameters: those of :class:`~raytestbed.traces.asrpt_workload.AsrptTraceParams`
plus ``trace`` (``helios`` | ``philly``) and ``statuses`` (keep only these
``new_status`` values, e.g. ``[Pass]``; default all).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from raytestbed.core.job import Job
from raytestbed.errors import TraceError
from raytestbed.traces.asrpt_workload import NEEDS_G, AsrptTraceParams, TraceRow, build_asrpt_jobs
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number
from raytestbed.traces.datadir import data_file
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload

FOLDER = "dirlab-helios-philly-15k"
COLUMNS = ("u_id", "user", "gpu_num", "cpu_num", "node_num", "interval", "run_time", "new_status")


class DirlabParams(AsrptTraceParams):
    trace: Literal["helios", "philly"] = "helios"
    statuses: list[str] | None = None


def read_dirlab(path: Path, statuses: list[str] | None = None) -> list[TraceRow]:
    """GPU jobs of one DIR-LAB slice, arrival rebuilt from ``interval``; bad rows raise TraceError."""
    rows: list[TraceRow] = []
    t = 0.0
    for where, row in csv_rows(path, COLUMNS):
        num = {c: parse_number(row[c], where, c, int) for c in ("user", "gpu_num", "cpu_num", "node_num")}
        t += parse_number(row["interval"], where, "interval", maximum=MAX_SECONDS)
        if t > MAX_SECONDS:
            raise TraceError(f"{where}: column 'interval': the submit time rebuilt from it, {t:g} s, is above "
                             f"the limit {MAX_SECONDS:g} s")
        dur = parse_number(row["run_time"], where, "run_time", maximum=MAX_SECONDS)
        status = (row["new_status"] or "").strip()
        if num["gpu_num"] == 0 or (statuses is not None and status not in statuses):
            continue
        user = f"u{num['user']}"
        group = f"{user}:g{num['gpu_num']}:c{num['cpu_num']}:n{num['node_num']}"
        rows.append(TraceRow(where, t, num["gpu_num"], float(dur), user, group))
    return rows


@register_workload("dirlab", identical_servers=NEEDS_G)
def dirlab_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """A-SRPT jobs from a DIR-LAB Helios or Philly slice (see the module docstring)."""
    p: DirlabParams = parse_params(DirlabParams, params, ctx.where)  # type: ignore[assignment]
    path = data_file(f"{FOLDER}/{p.trace}_data_training.csv", [ctx.base_dir],
                     None if p.path is None else ctx.resolve(p.path))
    return build_asrpt_jobs(read_dirlab(path, p.statuses), p, ctx)
