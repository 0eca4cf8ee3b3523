"""Parrot's workloads (spec parrot.md §6.1): ``ms60``, ``ms60_poisson``, ``fb_coflow``.

``ms60`` — the 60-job Microsoft trace (``microsoft-60job-tiresias/60_job.csv``):
every job gets ``gpu_scale`` x num_gpu workers (one GPU each) and as many
parameter servers (or U[1, ps_max] of them, Fig. 10's Delta), and runs
``iteration_scale`` x iterations iterations of a push coflow (workers -> PSs,
all-to-all) then a pull coflow (PSs -> workers). Coflow length L_m (the largest
flow) = ``max_coflow_mb`` x d_m / max d, with d = duration / iterations the
per-iteration time; every flow of every coflow is drawn U(0, L_m] afresh (PR-9).
Compute between coflows: ``compute_scale`` x d_m per iteration (0 = the paper's
"perfect computation"; > 0 is the §7 computation-time extension). Placement is
the placement policy's (the paper: random, e.g. ``fifo`` with ``spread: random``).

``ms60_poisson`` — ``jobs`` jobs sampled with replacement from the 60, Poisson
arrivals with mean gap ``mean_gap_s`` (Fig. 9: 0.1 - 1 s), times ``arrival_scale``.

``fb_coflow`` — the Facebook coflow benchmark (``coflow-fb2010``), every coflow
a one-iteration job of one coflow: reducer r receives its shuffle MB split
equally among the mappers; rack-level ports are servers 0..149 (the cluster
needs >= 150 servers, or ``fold_ports: true`` maps port p to p mod N).

Data directory: the ``path`` parameter, else ``$RAYTESTBED_DATA_DIR``, else the
first ``shared/data`` found walking up from this file. Sizes: MB = ``mb_bytes``
bytes (10^6 by default).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt

from raytestbed.core.job import CommPattern, Job, JobTraffic, Stage, StageProfile
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.csvrows import csv_rows
from raytestbed.traces.registry import WorkloadContext, parse_params, register_workload

MS60_FILE = ("microsoft-60job-tiresias", "60_job.csv")
FB_FILE = ("coflow-fb2010", "FB2010-1Hr-150-0.txt")


def data_dir() -> Path | None:
    """``$RAYTESTBED_DATA_DIR`` or the nearest ``shared/data`` above this file (None if absent)."""
    env = os.environ.get("RAYTESTBED_DATA_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return None


def data_file(parts: tuple[str, str], path: str | None, ctx: WorkloadContext | None = None) -> Path:
    if path:
        return ctx.resolve(path) if ctx is not None else Path(path)
    base = data_dir()
    if base is None:
        raise ConfigError(f"workload: no data directory for {'/'.join(parts)} (set RAYTESTBED_DATA_DIR or 'path')")
    return base.joinpath(*parts)


class Ms60Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
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
        out = {"model": (row["model_name"] or "").strip()}
        for col, kind in (("job_id", int), ("num_gpu", int), ("submit_time", float), ("iterations", int),
                          ("duration", float)):
            raw = (row.get(col) or "").strip()
            try:
                v = kind(float(raw))
            except ValueError:
                raise TraceError(f"{where}: column {col!r}: {raw!r} is not a number") from None
            if v < 0 or (col in ("num_gpu", "iterations", "duration") and v <= 0):
                raise TraceError(f"{where}: column {col!r}: {raw!r} must be > 0")
            out[col] = v
        rows.append(out)
    if not rows:
        raise TraceError(f"{path}: no jobs")
    return rows


def ps_jobs(rows: list[dict], arrivals: list[float], p: Ms60Params, seed: int, num_servers: int) -> list[Job]:
    """PS jobs with random U(0, L_m] flows (spec §6.1) from trace rows and arrival times."""
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
        jobs.append(Job(
            job_id=k, arrival_s=arr, iterations=max(1, round(r["iterations"] * p.iteration_scale)),
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


class FbParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = "fb_coflow"
    path: str | None = None
    limit: PositiveInt | None = None
    mb_bytes: PositiveFloat = 1e6
    arrival_scale: NonNegativeFloat = 1.0
    fold_ports: bool = False


@register_workload("fb_coflow")
def fb_coflow_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Single-coflow jobs from the Facebook coflow benchmark (see module doc)."""
    p: FbParams = parse_params(FbParams, params, ctx.where)  # type: ignore[assignment]
    path = data_file(FB_FILE, p.path, ctx)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    head = lines[0].split()
    if len(head) != 2:
        raise TraceError(f"{path} line 1: expected '<ports> <coflows>'")
    ports = int(head[0])
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
        tok = line.split()
        where = f"{path} line {ln}"
        try:
            cid, arr_ms, n_map = int(tok[0]), float(tok[1]), int(tok[2])
            maps = [int(x) % n_srv for x in tok[3:3 + n_map]]
            n_red = int(tok[3 + n_map])
            reds = [(int(a) % n_srv, float(b)) for a, b in (x.split(":") for x in tok[4 + n_map:4 + n_map + n_red])]
        except (ValueError, IndexError):
            raise TraceError(f"{where}: malformed coflow line") from None
        if len(maps) != n_map or len(reds) != n_red or n_map == 0 or n_red == 0:
            raise TraceError(f"{where}: mapper/reducer counts do not match the line")
        flows = [(m, r, mb * p.mb_bytes / n_map) for r, mb in reds for m in maps]
        jobs.append(Job(job_id=cid, arrival_s=arr_ms / 1000.0 * p.arrival_scale, iterations=1, stages=stage,
                        comm=CommPattern.RAR, model="fb-coflow",
                        traffic=JobTraffic(coflows=(tuple(flows),), compute_s=0.0)))
    return jobs
