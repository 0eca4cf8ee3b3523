"""Benchmark: Heavy-Edge GPU mapping vs the optimal placement ILP (A-SRPT Table II).

For each model, one pipeline configuration on ``--gpus`` GPUs (``--config
even:S``: S compute-balanced stages, GPUs dealt evenly; ``planner``: the
planner's fastest configuration with at least two stages) is placed on ``--cases`` random
server-availability cases (free GPUs per server, summing to the job's GPUs,
at least two servers, at most g per server). Both mappers get the same
capacities (most-available order). Reported: mean per-iteration training time
(PITT, A-SRPT eq. 7) of each, the mean gap, and the mean placement computation
time (PCT, wall clock; Heavy-Edge's caches are cleared before every call).

A second part places ``--random-jobs`` random jobs (random model, GPU count and
configuration, random availability) and reports the distribution of the
PITT ratio mapper / ILP.

The comparator is ``raytestbed.placement.heavy_edge`` when it is importable,
otherwise ``core.timing.contiguous_mapper`` (printed in the header). Run:

    raytestbed bench placement [--cases 20] [--gpus 16] [--random-jobs 200] \
        [--config even:4,planner@8,even:2@8,even:8@8]
    (the functions: raytestbed/experiments/papers/asrpt_table2.py; ``raytestbed reproduce asrpt --fig table2``)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from raytestbed.experiments.papers.asrpt_table2 import format_table2, random_sweep, table2
from raytestbed.resources import package_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench placement", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vgg19-cifar,vgg16,gpt-small")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--config", default="even:4",
                    help="even:S (S balanced stages) or planner; a comma list of CFG[@GPUS] runs several setups")
    ap.add_argument("--random-jobs", type=int, default=200)
    ap.add_argument("--random-models", default="vgg16,resnet101,inception_v3,gnmt,gnmt_large,gpt-small,vgg19-cifar")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default=str(package_dir("clusters") / "asrpt_sim_250x8.yaml"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    for setup in args.config.split(","):  # CFG or CFG@GPUS
        config, _, gpus = setup.strip().partition("@")
        gpus = int(gpus) if gpus else args.gpus
        name, rows = table2(args.models.split(","), args.cases, gpus, args.seed, Path(args.cluster), config)
        print(f"Table II: {gpus}-GPU pipeline job ({config}), {args.cases} availability cases per model, "
              f"cluster {Path(args.cluster).stem}")
        print(format_table2(name, rows) + "\n")
    if args.random_jobs:
        s = random_sweep(args.random_models.split(","), args.random_jobs, args.seed + 1, Path(args.cluster))
        print(f"\nrandom jobs ({s['jobs']}: 2-32 GPUs, models {args.random_models}): PITT ratio mapper/ILP "
              f"mean {s['ratio_mean']:.3f}, p50 {s['ratio_p50']:.3f}, p95 {s['ratio_p95']:.3f}, "
              f"max {s['ratio_max']:.3f}, min {s['ratio_min']:.3f}; optimal in {s['optimal_share']:.0%}")
        print(f"placement time: mapper {s['mapper_pct_ms']:.3f} ms, ILP {s['ilp_pct_ms']:.1f} ms "
              f"(max {s['ilp_pct_max_ms']:.1f} ms)")
    print(f"\nwall {time.perf_counter() - t0:.1f} s")
    return 0
