"""Gavel's trace format (``workload.kind: gavel``), read as Gavel's own parser reads it.

One job per line, ten tab-separated fields (Gavel's ``scheduler/utils.py``, ``parse_trace``):

    job type, command, working directory, num-steps argument, needs data dir (0/1), total steps,
    scale factor, priority weight, SLO, arrival time (s)

for example ``ResNet-18 (batch size 128)<TAB>python3 main.py ...<TAB>image_classification/cifar10<TAB>
--num_steps<TAB>1<TAB>925982<TAB>4<TAB>1<TAB>-1.000000<TAB>0``. A job becomes a single-stage
data-parallel job of ``scale factor`` GPUs and ``total steps`` iterations whose ``model`` is the job
type, arriving at ``arrival time``; the priority weight and SLO go to ``job.extra``
(``priority_weight``, ``slo``; Gavel's policies read the weight). Its speed on each GPU type is the
throughput table's (the loader's ``throughputs``, which the trial uses unless ``timing.throughputs``
names another): a job type the table does not have at that scale factor is refused with its line. The command, working
directory, steps argument and data-dir flag are Gavel's launch details and are not used.

Parameters: ``path`` (relative to the trial file), ``throughputs`` (the table, as ``timing.throughputs``;
default ``gavel``), ``arrival_scale``, ``limit`` (first N lines).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import PositiveFloat, PositiveInt

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.errors import TraceError
from raytestbed.traces.csvrows import MAX_INT, MAX_SECONDS, parse_number
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload
from raytestbed.core.gpu_types import ThroughputTable
from raytestbed.traces.throughputs import load_throughputs

FIELDS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
          "scale_factor", "priority_weight", "slo", "arrival_time")


class GavelTraceParams(LoaderParams):
    kind: str = "gavel"
    path: str
    throughputs: str = "gavel"
    arrival_scale: PositiveFloat = 1.0
    limit: PositiveInt | None = None


def read_gavel_trace(path: Path, limit: int | None = None) -> list[tuple[str, dict[str, str]]]:
    """(``file line N``, field -> text) of every line of a Gavel trace; TraceError for a line without ten fields."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    out = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cells = line.split("\t")
        where = f"{path} line {n}"
        if len(cells) != len(FIELDS):
            raise TraceError(f"{where}: {len(cells)} tab-separated fields, Gavel's trace format has {len(FIELDS)} "
                             f"({', '.join(FIELDS)})")
        out.append((where, dict(zip(FIELDS, cells))))
        if limit is not None and len(out) >= limit:
            break
    return out


class GavelJobs(list):
    """The jobs of a Gavel trace, with the throughput table they were checked against (``throughputs``:
    the trial's table unless ``timing.throughputs`` names one)."""

    throughputs: ThroughputTable


@register_workload("gavel")
def gavel_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Jobs of a Gavel trace (ten tab-separated fields) at its throughput table's speeds (see the module docstring)."""
    p: GavelTraceParams = parse_params(GavelTraceParams, params, ctx.where)  # type: ignore[assignment]
    table = load_throughputs(p.throughputs, ctx.base_dir)
    jobs = GavelJobs()
    jobs.throughputs = table
    for jid, (where, row) in enumerate(read_gavel_trace(ctx.resolve(p.path), p.limit)):
        job_type = row["job_type"].strip()
        steps = parse_number(row["total_steps"], where, "total_steps", int, positive=True, maximum=MAX_INT)
        sf = parse_number(row["scale_factor"], where, "scale_factor", int, positive=True)
        weight = parse_number(row["priority_weight"], where, "priority_weight", float, positive=True)
        slo = parse_number(row["slo"], where, "slo", float, allow_negative=True)
        arrival = parse_number(row["arrival_time"], where, "arrival_time", maximum=MAX_SECONDS) * p.arrival_scale
        jobs.append(gavel_job(jid, job_type, steps, sf, arrival, table, ctx, where, weight, slo))
    return jobs


def gavel_job(jid: int, job_type: str, steps: int, scale_factor: int, arrival_s: float, table: ThroughputTable,
              ctx: WorkloadContext, where: str, priority_weight: float = 1.0, slo: float = -1.0) -> Job:
    """One Gavel job: a single-stage data-parallel job of ``scale_factor`` GPUs and ``steps`` iterations whose
    ``model`` is ``job_type``, arriving at ``arrival_s`` (seconds); TraceError naming ``where`` if the cluster
    is too small or the table has no row for (``job_type``, ``scale_factor``)."""
    if scale_factor > ctx.cluster.total_gpus:
        raise TraceError(f"{where}: job {jid} needs {scale_factor} GPUs but the cluster has {ctx.cluster.total_gpus}")
    speeds = [v for t in table.gpu_types if (v := table.get(t, job_type, scale_factor))]
    if not speeds:
        raise TraceError(f"{where}: job type {job_type!r} at scale factor {scale_factor} is not in the throughput "
                         f"table {table.source}")
    step_s = 1.0 / max(speeds)  # profile: its fastest type's time per step (used only without the table)
    return Job(jid, arrival_s, steps, (Stage(scale_factor, StageProfile(step_s / 2, step_s / 2, 0.0, 0.0)),),
               CommPattern.RAR, model=job_type, extra={"priority_weight": priority_weight, "slo": slo})
