"""Generic jobs CSV (``workload.kind: csv``).

Required columns: ``job_id``, ``arrival_s``, ``gpus``, ``model`` and either
``iterations`` or ``duration_s`` (then n_i = duration / alpha~min, A-SRPT
§V-A-1-b). Optional: ``comm`` (pipeline | rar | ps; default from the
``comm`` parameter), ``stages``, ``num_ps``, ``user``, ``group``.

Parameters: ``path`` (relative to the trial file), ``comm`` (default pattern),
``arrival_scale`` and ``iteration_scale`` (uniform down-scaling, e.g. 0.1 as in
the A-SRPT testbed), ``limit`` (first N rows).

Every bad row is reported as ``file line N: column 'x': reason``: a missing or non-numeric
cell, NaN or infinity, a negative time, zero GPUs, iterations, stages or PSs, a time above
:data:`~raytestbed.traces.csvrows.MAX_SECONDS` (checks: :func:`~raytestbed.traces.csvrows.parse_number`).
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from pydantic import PositiveFloat, PositiveInt

from raytestbed.core.job import CommPattern, Job
from raytestbed.errors import TraceError
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number
from raytestbed.traces.jobs import build_job, iterations_for_duration, scaled_iterations
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload


class CsvParams(LoaderParams):
    kind: str = "csv"
    path: str
    comm: CommPattern = CommPattern.PIPELINE
    arrival_scale: PositiveFloat = 1.0
    iteration_scale: PositiveFloat = 1.0
    limit: PositiveInt | None = None


REQUIRED = ("job_id", "arrival_s", "gpus", "model")


def _optional(row: dict, col: str, where: str, kind: type, **limits):
    """An optional numeric cell: ``None`` when the column is absent or the cell blank, else checked."""
    raw = row.get(col)
    if raw is None or raw.strip() == "":
        return None
    return parse_number(raw, where, col, kind, **limits)


@register_workload("csv")
def csv_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    p: CsvParams = parse_params(CsvParams, params, ctx.where)  # type: ignore[assignment]
    path: Path = ctx.resolve(p.path)
    jobs: list[Job] = []
    seen: set[int] = set()
    # every row read either becomes a job or raises, so the first `limit` rows are the first `limit` jobs
    for where, row in islice(csv_rows(path, REQUIRED + (("iterations", "duration_s"),)), p.limit):
        jid = parse_number(row.get("job_id"), where, "job_id", int)
        if jid in seen:
            raise TraceError(f"{where}: duplicate job_id {jid}")
        seen.add(jid)
        gpus = parse_number(row.get("gpus"), where, "gpus", int, positive=True)
        if gpus > ctx.cluster.total_gpus:
            raise TraceError(f"{where}: job {jid} needs {gpus} GPUs but the cluster has {ctx.cluster.total_gpus}")
        model = (row.get("model") or "").strip()
        if not model:
            raise TraceError(f"{where}: column 'model': missing value")
        prof = ctx.profile(model, where)
        comm_raw = (row.get("comm") or "").strip() or p.comm.value
        try:
            comm = CommPattern(comm_raw)
        except ValueError:
            raise TraceError(f"{where}: column 'comm': {comm_raw!r} is not one of pipeline, rar, ps") from None
        stages = _optional(row, "stages", where, int, positive=True)
        num_ps = _optional(row, "num_ps", where, int, positive=True)
        arrival = parse_number(row.get("arrival_s"), where, "arrival_s", maximum=MAX_SECONDS) * p.arrival_scale
        iters = _optional(row, "iterations", where, int, positive=True)
        duration = _optional(row, "duration_s", where, float, maximum=MAX_SECONDS)
        if iters is None and duration is None:
            raise TraceError(f"{where}: needs 'iterations' or 'duration_s'")
        try:
            job = build_job(jid, arrival, prof, gpus, comm, iters or 1, user=row.get("user") or "",
                            group=row.get("group") or "", num_stages=stages, num_ps=num_ps,
                            duration_hint_s=duration)
            if iters is None:
                job.iterations = iterations_for_duration(job, duration, ctx.cluster)
            job.iterations = scaled_iterations(job.iterations, p.iteration_scale, "iteration_scale")
        except ValueError as e:
            raise TraceError(f"{where}: {e}") from None
        jobs.append(job)
    return jobs
