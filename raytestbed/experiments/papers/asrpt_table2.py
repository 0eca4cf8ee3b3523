"""A-SRPT Table II: Heavy-Edge GPU mapping vs the optimal placement ILP, as functions
(``raytestbed reproduce asrpt --fig table2``; ``raytestbed bench placement`` prints them with options).

For each model, one pipeline configuration on a number of GPUs (``even:S``: S compute-balanced
stages, GPUs dealt evenly; ``planner``: the planner's fastest configuration with at least two stages)
is placed on random server-availability cases (free GPUs per server, summing to the job's GPUs, at
least two servers, at most g per server). Both mappers get the same capacities (most-available
order). Reported: mean per-iteration training time (PITT, A-SRPT eq. 7) of each, the mean gap, and
the mean placement computation time (PCT, wall clock; Heavy-Edge's caches are cleared before every
call). :func:`random_sweep` places random jobs (random model, GPU count and configuration, random
availability) and summarises the PITT ratio mapper / ILP.

The comparator is Heavy-Edge (:mod:`raytestbed.placement.heavy_edge`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from raytestbed.config import load_cluster
from raytestbed.core.job import Job
from raytestbed.core.profile import default_profiles
from raytestbed.placement import heavy_edge as he
from raytestbed.placement.ilp import placement_alpha, solve_placement_ilp
from raytestbed.placement.planner import plan_configs, planning_bandwidth
from raytestbed.traces.jobs import build_job

PAPER = {  # A-SRPT Table II: (Heavy-Edge PITT ms, PCT ms, ILP PITT ms, ILP PCT ms)
    "VGG19": (88.11, 1.94, 82.96, 55318.86),
    "GPT-175B": (10.14, 1.52, 10.14, 2288.12),
}

Mapper = Callable[[Job, Sequence[int]], list[list[int]]]


def comparator() -> tuple[str, Mapper]:
    """Heavy-Edge, its caches cleared before every call."""
    caches = [obj for obj in vars(he).values() if callable(getattr(obj, "cache_clear", None))]

    def mapper(job: Job, caps: Sequence[int]) -> list[list[int]]:
        for c in caches:
            c.cache_clear()
        return he.heavy_edge_counts(job, caps, 0)

    return "heavy_edge", mapper


def random_caps(rng: np.random.Generator, gpus: int, g: int) -> list[int]:
    """Free GPUs per server, summing to ``gpus``, each in 1..g, at least two servers (if gpus > 1)."""
    lo = max(2, -(-gpus // g)) if gpus > 1 else 1
    hi = min(gpus, max(lo, 2 * -(-gpus // g) + 2))
    while True:
        m = int(rng.integers(lo, hi + 1))
        cuts = np.sort(rng.choice(np.arange(1, gpus), size=m - 1, replace=False)) if m > 1 else np.array([], int)
        parts = np.diff(np.concatenate([[0], cuts, [gpus]])).astype(int)
        if parts.max() <= g:
            return sorted((int(p) for p in parts), reverse=True)


@dataclass
class Case:
    model: str
    replicas: tuple[int, ...]
    caps: list[int]
    pitt_map_s: float
    pitt_ilp_s: float
    pct_map_s: float
    pct_ilp_s: float


def run_case(job: Job, caps: list[int], mapper: Mapper, g: int, b_inter: float, b_intra: float) -> Case:
    t0 = time.perf_counter()
    counts = mapper(job, caps)
    t1 = time.perf_counter()
    res = solve_placement_ilp(job, caps, g, b_inter, b_intra, exact=True)
    t2 = time.perf_counter()
    return Case(job.model, job.replicas(), caps, placement_alpha(job, counts, g, b_inter, b_intra),
                res.alpha_s, t1 - t0, t2 - t1)


def pipeline_job(profile, gpus: int, config: str, g: int, b_inter: float, b_intra: float) -> Job:
    """The benchmark job: ``even:S`` = S compute-balanced stages with the GPUs dealt evenly
    (``traces.jobs.pipeline_stages``); ``planner`` = the planner's fastest configuration with >= 2 stages."""
    if config.startswith("even:"):
        return build_job(0, 0.0, profile, gpus, "pipeline", 1, num_stages=int(config[5:]))
    if config != "planner":
        raise SystemExit(f"--config {config!r}: expected even:S or planner")
    cfgs = plan_configs(profile, gpus, planning_bandwidth(gpus, g, b_inter, b_intra))
    cfg = ([c for c in cfgs if c.num_stages >= 2] or cfgs)[0]
    return build_job(0, 0.0, profile, gpus, "pipeline", 1, boundaries=cfg.boundaries, replicas=cfg.replicas)


def table2(models: list[str], cases: int, gpus: int, seed: int, cluster_file: Path,
           config: str = "even:4") -> tuple[str, list[dict]]:
    """Part 1 (Table II). Returns the comparator name and one summary row per model."""
    cl = load_cluster(cluster_file).build()
    g, bi, bx = cl.gpus_per_server, cl.nic_bps, cl.intra_bps
    name, mapper = comparator()
    profs = default_profiles()
    rows = []
    for model in models:
        rng = np.random.default_rng(seed)
        try:
            job = pipeline_job(profs[model], gpus, config, g, bi, bx)
        except ValueError as e:  # e.g. more stages than the model has layers
            print(f"  skipped {model} ({config} on {gpus} GPUs): {e}")
            continue
        res = [run_case(job, random_caps(rng, gpus, g), mapper, g, bi, bx) for _ in range(cases)]
        he = statistics.fmean(c.pitt_map_s for c in res)
        ilp = statistics.fmean(c.pitt_ilp_s for c in res)
        rows.append(dict(
            model=model, replicas="-".join(map(str, job.replicas())), cases=cases,
            mapper_pitt_ms=he * 1e3, ilp_pitt_ms=ilp * 1e3, gap_pct=(he / ilp - 1) * 100,
            mean_case_gap_pct=statistics.fmean((c.pitt_map_s / c.pitt_ilp_s - 1) * 100 for c in res),
            optimal_cases=sum(c.pitt_map_s <= c.pitt_ilp_s * (1 + 1e-9) for c in res),
            mapper_pct_ms=statistics.fmean(c.pct_map_s for c in res) * 1e3,
            mapper_pct_p99_ms=float(np.percentile([c.pct_map_s for c in res], 99)) * 1e3,
            ilp_pct_ms=statistics.fmean(c.pct_ilp_s for c in res) * 1e3,
        ))
    return name, rows


def random_sweep(models: list[str], jobs: int, seed: int, cluster_file: Path, max_gpus: int = 32) -> dict:
    """Part 2: ratio mapper / ILP over random jobs and availabilities."""
    cl = load_cluster(cluster_file).build()
    g, bi, bx = cl.gpus_per_server, cl.nic_bps, cl.intra_bps
    _, mapper = comparator()
    profs = default_profiles()
    rng = np.random.default_rng(seed)
    ratios, t_map, t_ilp = [], [], []
    for _ in range(jobs):
        model = models[int(rng.integers(len(models)))]
        gpus = int(rng.integers(2, max_gpus + 1))
        cfgs = plan_configs(profs[model], gpus, planning_bandwidth(gpus, g, bi, bx))[:3]
        cfg = cfgs[int(rng.integers(len(cfgs)))]
        job = build_job(0, 0.0, profs[model], gpus, "pipeline", 1, boundaries=cfg.boundaries, replicas=cfg.replicas)
        c = run_case(job, random_caps(rng, gpus, g), mapper, g, bi, bx)
        ratios.append(c.pitt_map_s / c.pitt_ilp_s)
        t_map.append(c.pct_map_s)
        t_ilp.append(c.pct_ilp_s)
    r = np.array(ratios)
    return dict(jobs=jobs, ratio_mean=float(r.mean()), ratio_p50=float(np.median(r)),
                ratio_p95=float(np.percentile(r, 95)), ratio_max=float(r.max()), ratio_min=float(r.min()),
                optimal_share=float(np.mean(r <= 1 + 1e-9)), mapper_pct_ms=float(np.mean(t_map)) * 1e3,
                ilp_pct_ms=float(np.mean(t_ilp)) * 1e3, ilp_pct_max_ms=float(np.max(t_ilp)) * 1e3)


def format_table2(name: str, rows: list[dict]) -> str:
    lines = [f"comparator: {name}",
             "model          config      cases  mapper PITT ms  ILP PITT ms  gap %   optimal  mapper PCT ms (p99)  ILP PCT ms",
             "-------------  ----------  -----  --------------  -----------  ------  -------  -------------------  ----------"]
    for r in rows:
        lines.append(f"{r['model']:<13}  {r['replicas']:<10}  {r['cases']:>5}  {r['mapper_pitt_ms']:>14.2f}  "
                     f"{r['ilp_pitt_ms']:>11.2f}  {r['gap_pct']:>+6.1f}  {r['optimal_cases']:>3}/{r['cases']:<3}  "
                     f"{r['mapper_pct_ms']:>8.3f} ({r['mapper_pct_p99_ms']:.3f})     {r['ilp_pct_ms']:>10.1f}")
    lines.append("paper (Table II): VGG19 88.11 vs 82.96 ms (+6.2%), PCT 1.94 ms vs 55,318.86 ms; "
                 "GPT-175B 10.14 vs 10.14 ms (+0%), PCT 1.52 ms vs 2,288.12 ms")
    return "\n".join(lines)
