"""Parrot's workloads: ``ms60``, ``ms60_poisson``, ``fb_coflow``.

``ms60`` — the 60-job Microsoft trace (``microsoft-60job-tiresias/60_job.csv``):
every job gets ``gpu_scale`` x num_gpu workers (one GPU each) and as many
parameter servers (or U[1, ps_max] of them, Fig. 10's Delta), and runs
``iteration_scale`` x iterations iterations of a push coflow (workers -> PSs,
all-to-all) then a pull coflow (PSs -> workers). Coflow length L_m (the largest
flow) = ``max_coflow_mb`` x d_m / max d, with d = duration / iterations the
per-iteration time; every flow of every coflow is drawn U(0, L_m] afresh.
Compute between coflows: ``compute_scale`` x d_m per iteration (0 = the paper's
"perfect computation"; > 0 is the §7 computation-time extension). Placement is
the placement policy's (the paper: random, e.g. ``fifo`` with ``spread: random``).

``ms60_poisson`` — ``jobs`` jobs sampled with replacement from the 60, Poisson
arrivals with mean gap ``mean_gap_s`` (Fig. 9: 0.1 - 1 s), times ``arrival_scale``.

``fb_coflow`` — the Facebook coflow benchmark (``coflow-fb2010``), every coflow
a one-iteration job of one coflow: reducer r receives its shuffle MB split
equally among the mappers; rack-level ports are servers 0..149 (the cluster
needs >= 150 servers, or ``fold_ports: true`` maps port p to p mod N).

Data directory: the ``path`` parameter, else the data folder of
:mod:`raytestbed.traces.datadir` (``$RAYTESTBED_DATA_DIR`` or the data folder found upwards). Sizes: MB =
``mb_bytes`` bytes (10^6 by default). Bad cells are refused with the one-line
``file line N: column 'x': reason`` of :func:`raytestbed.traces.csvrows.parse_number`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from raytestbed.core.job import CommPattern, Job, JobTraffic, Stage, StageProfile
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number
from raytestbed.traces.datadir import data_file as shared_data_file
from raytestbed.traces.jobs import scaled_iterations
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload

MS60_FILE = ("microsoft-60job-tiresias", "60_job.csv")
FB_FILE = ("coflow-fb2010", "FB2010-1Hr-150-0.txt")


def data_file(parts: tuple[str, str], path: str | None, ctx: WorkloadContext | None = None) -> Path:
    """``path`` (relative to the trial's folder) if given, else the file in the data folder (TraceError if absent)."""
    if path:
        return ctx.resolve(path) if ctx is not None else Path(path)
    return shared_data_file("/".join(parts), [ctx.base_dir] if ctx is not None else [])


class Ms60Params(LoaderParams):
    kind: str = "ms60"
    path: str | None = None
    gpu_scale: PositiveInt = 2
    iteration_scale: PositiveFloat = 1.0
    arrival_scale: NonNegativeFloat = 1.0
    max_coflow_mb: PositiveFloat = 1000.0
    mb_bytes: PositiveFloat = 1e6
    ps_max: PositiveInt | None = Field(None, description="PSs per job uniform in [1, ps_max] (Fig. 10)")
    compute_scale: NonNegativeFloat = 0.0
    limit: PositiveInt | None = None


class Ms60PoissonParams(Ms60Params):
    kind: str = "ms60_poisson"
    jobs: PositiveInt = 100
    mean_gap_s: PositiveFloat = 0.5


def read_ms60(path: Path) -> list[dict]:
    """Rows of 60_job.csv as dicts with num_gpu, submit_time, iterations, model_name, duration."""
    rows = []
    need = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
    for where, row in csv_rows(path, need):
        out = {"model": (row["model_name"] or "").strip(),
               "job_id": parse_number(row["job_id"], where, "job_id", int),
               "num_gpu": parse_number(row["num_gpu"], where, "num_gpu", int, positive=True),
               "submit_time": parse_number(row["submit_time"], where, "submit_time", maximum=MAX_SECONDS),
               "iterations": parse_number(row["iterations"], where, "iterations", int, positive=True),
               "duration": parse_number(row["duration"], where, "duration", positive=True, maximum=MAX_SECONDS)}
        rows.append(out)
    if not rows:
        raise TraceError(f"{path}: no jobs")
    return rows


def ps_jobs(rows: list[dict], arrivals: list[float], p: Ms60Params, seed: int, num_servers: int) -> list[Job]:
    """PS jobs with random U(0, L_m] flows from trace rows and arrival times."""
    per = [r["duration"] / r["iterations"] for r in rows]
    d_max = max(per)
    rng = np.random.default_rng(seed)
    jobs = []
    for k, (r, arr, d) in enumerate(zip(rows, arrivals, per)):
        workers = r["num_gpu"] * p.gpu_scale
        num_ps = int(rng.integers(1, p.ps_max + 1)) if p.ps_max else workers
        if workers + num_ps > num_servers:
            raise ConfigError(f"job {k}: {workers} workers + {num_ps} PSs need distinct servers, "
                              f"the cluster has {num_servers}")
        traffic = JobTraffic(compute_s=p.compute_scale * d,
                             max_flow_bytes=p.max_coflow_mb * p.mb_bytes * d / d_max, seed=seed)
        try:
            iters = scaled_iterations(r["iterations"], p.iteration_scale, "iterations x iteration_scale")
        except ValueError as e:
            raise ConfigError(f"workload: job {k}: {e}") from None
        if not (math.isfinite(traffic.max_flow_bytes) and math.isfinite(traffic.compute_s)):
            raise ConfigError(f"workload: max_coflow_mb x mb_bytes or compute_scale too large (job {k}: "
                              f"{traffic.max_flow_bytes:g} bytes, {traffic.compute_s:g} s)")
        jobs.append(Job(
            job_id=k, arrival_s=arr, iterations=iters,
            stages=(Stage(workers, StageProfile(0.0, 0.0)),), comm=CommPattern.PS, model=r["model"],
            num_ps=num_ps, duration_hint_s=r["duration"], traffic=traffic,
            extra={"trace_job_id": r["job_id"], "trace_iterations": r["iterations"]},
        ))
    return jobs


@register_workload("ms60")
def ms60_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Parrot's 60 Microsoft-trace jobs with their trace arrival times (parrot.md §6.1)."""
    p: Ms60Params = parse_params(Ms60Params, params, ctx.where)  # type: ignore[assignment]
    rows = read_ms60(data_file(MS60_FILE, p.path, ctx))
    if p.limit:
        rows = rows[: p.limit]
    arrivals = [r["submit_time"] * p.arrival_scale for r in rows]
    return ps_jobs(rows, arrivals, p, ctx.seed, ctx.cluster.num_servers)


@register_workload("ms60_poisson")
def ms60_poisson_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Jobs drawn from Parrot's 60 Microsoft-trace jobs, with Poisson arrivals (parrot.md §6.1)."""
    p: Ms60PoissonParams = parse_params(Ms60PoissonParams, params, ctx.where)  # type: ignore[assignment]
    rows = read_ms60(data_file(MS60_FILE, p.path, ctx))
    rng = np.random.default_rng(ctx.seed + 1_000_003)
    picked = [rows[i] for i in rng.integers(0, len(rows), size=p.jobs)]
    gaps = rng.exponential(p.mean_gap_s, size=p.jobs)
    arrivals = (np.concatenate([[0.0], np.cumsum(gaps[1:])]) * p.arrival_scale).tolist()
    return ps_jobs(picked, arrivals, p, ctx.seed, ctx.cluster.num_servers)


class FbParams(LoaderParams):
    kind: str = "fb_coflow"
    path: str | None = None
    limit: PositiveInt | None = None
    mb_bytes: PositiveFloat = 1e6
    arrival_scale: NonNegativeFloat = 1.0
    fold_ports: bool = False


def _fb_line(tok: list[str], where: str, n_srv: int) -> tuple[int, float, list[int], list[tuple[int, float]]]:
    """(coflow id, arrival ms, mapper ports mod n_srv, [(reducer port mod n_srv, MB)]) of one FB line.

    Fields: ``<id> <arrival ms> <#mappers> <mapper ports...> <#reducers> <port:MB ...>``; each is
    checked by :func:`parse_number` (arrival at most MAX_SECONDS x 1000 ms, at least one mapper and
    one reducer, MB finite and >= 0) and named in the error.
    """
    def field(i: int, name: str, kind: type = int, **limits):
        return parse_number(tok[i] if i < len(tok) else None, where, name, kind, **limits)

    cid = field(0, "coflow id")
    arr_ms = field(1, "arrival ms", float, maximum=MAX_SECONDS * 1000.0)
    n_map = field(2, "mappers", positive=True)
    maps = [field(3 + k, "mapper") % n_srv for k in range(n_map)]
    n_red = field(3 + n_map, "reducers", positive=True)
    reds = []
    for k in range(n_red):
        i = 4 + n_map + k
        port, sep, mb = (tok[i] if i < len(tok) else "").partition(":")
        if not sep:
            raise TraceError(f"{where}: column 'reducer': {tok[i] if i < len(tok) else ''!r} is not 'port:MB'")
        reds.append((parse_number(port, where, "reducer") % n_srv, parse_number(mb, where, "reducer MB", float)))
    if len(tok) != 4 + n_map + n_red:
        raise TraceError(f"{where}: {len(tok)} fields, expected {4 + n_map + n_red} for {n_map} mappers and "
                         f"{n_red} reducers")
    return cid, arr_ms, maps, reds


@register_workload("fb_coflow")
def fb_coflow_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Single-coflow jobs from the Facebook coflow benchmark (see module doc)."""
    p: FbParams = parse_params(FbParams, params, ctx.where)  # type: ignore[assignment]
    path = data_file(FB_FILE, p.path, ctx)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    head = lines[0].split()
    if len(head) != 2:
        raise TraceError(f"{path} line 1: expected '<ports> <coflows>'")
    ports = parse_number(head[0], f"{path} line 1", "ports", int, positive=True)
    n_srv = ctx.cluster.num_servers
    if ports > n_srv and not p.fold_ports:
        raise ConfigError(f"{ctx.where}: {path.name} has {ports} ports but the cluster has {n_srv} servers "
                          f"(use a cluster with >= {ports} servers or fold_ports: true)")
    stage = (Stage(1, StageProfile(0.0, 0.0)),)
    jobs: list[Job] = []
    for ln, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if p.limit is not None and len(jobs) >= p.limit:
            break
        cid, arr_ms, maps, reds = _fb_line(line.split(), f"{path} line {ln}", n_srv)
        n_map = len(maps)
        flows = [(m, r, mb * p.mb_bytes / n_map) for r, mb in reds for m in maps]
        if not all(math.isfinite(f[2]) for f in flows):
            raise TraceError(f"{path} line {ln}: column 'reducer MB': too large for mb_bytes {p.mb_bytes:g}")
        jobs.append(Job(job_id=cid, arrival_s=arr_ms / 1000.0 * p.arrival_scale, iterations=1, stages=stage,
                        comm=CommPattern.RAR, model="fb-coflow",
                        traffic=JobTraffic(coflows=(tuple(flows),), compute_s=0.0)))
    return jobs
