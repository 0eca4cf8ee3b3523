"""Generic jobs CSV (``workload.kind: csv``).

Required columns: ``job_id``, ``arrival_s``, ``gpus``, ``model`` and either
``iterations`` or ``duration_s`` (then n_i = duration / alpha~min, A-SRPT
§V-A-1-b). Optional: ``comm`` (pipeline | rar | ps; default from the
``comm`` parameter), ``stages``, ``num_ps``, ``user``, ``group``.

Parameters: ``path`` (relative to the trial file), ``comm`` (default pattern),
``arrival_scale`` and ``iteration_scale`` (uniform down-scaling, e.g. 0.1 as in
the A-SRPT testbed), ``limit`` (first N rows).

Every bad row is reported as ``file line N: column 'x': reason``.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt

from raytestbed.core.job import CommPattern, Job
from raytestbed.errors import TraceError
from raytestbed.traces.csvrows import csv_rows
from raytestbed.traces.jobs import build_job, iterations_for_duration
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload


class CsvParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = "csv"
    path: str
    comm: CommPattern = CommPattern.PIPELINE
    arrival_scale: PositiveFloat = 1.0
    iteration_scale: PositiveFloat = 1.0
    limit: PositiveInt | None = None


REQUIRED = ("job_id", "arrival_s", "gpus", "model")


def _num(row: dict, col: str, where: str, kind=float, required=True):
    raw = row.get(col)
    if raw is None or str(raw).strip() == "":
        if required:
            raise TraceError(f"{where}: column {col!r}: missing value")
        return None
    try:
        v = kind(float(raw)) if kind is int else kind(raw)
    except ValueError:
        raise TraceError(f"{where}: column {col!r}: {raw!r} is not a number") from None
    if kind is int and float(raw) != int(float(raw)):
        raise TraceError(f"{where}: column {col!r}: {raw!r} is not an integer")
    if v < 0:
        raise TraceError(f"{where}: column {col!r}: {raw!r} is negative")
    return v


@register_workload("csv")
def csv_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    p: CsvParams = parse_params(CsvParams, params, ctx.where)  # type: ignore[assignment]
    path: Path = ctx.resolve(p.path)
    jobs: list[Job] = []
    seen: set[int] = set()
    # every row read either becomes a job or raises, so the first `limit` rows are the first `limit` jobs
    for where, row in islice(csv_rows(path, REQUIRED + (("iterations", "duration_s"),)), p.limit):
        jid = _num(row, "job_id", where, int)
        if jid in seen:
            raise TraceError(f"{where}: duplicate job_id {jid}")
        seen.add(jid)
        gpus = _num(row, "gpus", where, int)
        if gpus < 1:
            raise TraceError(f"{where}: column 'gpus': must be >= 1")
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
        stages = _num(row, "stages", where, int, required=False)
        num_ps = _num(row, "num_ps", where, int, required=False)
        arrival = _num(row, "arrival_s", where) * p.arrival_scale
        iters = _num(row, "iterations", where, int, required=False)
        duration = _num(row, "duration_s", where, required=False)
        if iters is None and duration is None:
            raise TraceError(f"{where}: needs 'iterations' or 'duration_s'")
        try:
            job = build_job(jid, arrival, prof, gpus, comm, iters or 1, user=row.get("user") or "",
                            group=row.get("group") or "", num_stages=stages, num_ps=num_ps,
                            duration_hint_s=duration)
            if iters is None:
                job.iterations = iterations_for_duration(job, duration, ctx.cluster)
        except ValueError as e:
            raise TraceError(f"{where}: {e}") from None
        job.iterations = max(1, round(job.iterations * p.iteration_scale))
        jobs.append(job)
    return jobs
