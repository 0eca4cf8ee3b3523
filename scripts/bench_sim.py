"""Benchmark: simulate FIFO on the A-SRPT 250 x 8 cluster with 150,000 synthetic jobs.

Prints jobs/s of the whole run (workload generation excluded and reported
separately) and the decision-time percentiles. Run:

    .venv/bin/python scripts/bench_sim.py [--jobs 150000] [--policy fifo]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from raytestbed.config import load_cluster
from raytestbed.core.profile import default_profiles
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import WorkloadContext
from raytestbed.traces.synthetic import synthetic_workload

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=150_000)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--cluster", default=str(REPO / "cluster_configs" / "asrpt_sim_250x8.yaml"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    cluster = load_cluster(args.cluster).build()
    t0 = time.perf_counter()
    ctx = WorkloadContext(cluster, args.seed, REPO, default_profiles())
    # Trace-like mix: ~70% single-GPU jobs (A-SRPT §V-B-2-b); load close to the cluster's capacity.
    jobs = synthetic_workload({
        "jobs": args.jobs, "mean_interarrival_s": 30.0, "groups": 2000, "users": 300,
        "gpu_mix": {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.07, 16: 0.03},
        "iterations": [100, 20000],
    }, ctx)
    t_gen = time.perf_counter() - t0

    done = [0]
    t1 = time.perf_counter()
    sim = Simulator(cluster, jobs, make_policy(args.policy, seed=args.seed),
                    progress=lambda d, n: done.__setitem__(0, d))
    res = sim.run()
    t_sim = time.perf_counter() - t1
    dt = res.decision_times_s
    fin = sum(1 for r in res.records if r.finish_s == r.finish_s)
    print(f"cluster        {cluster.name}: {cluster.num_servers} servers, {cluster.total_gpus} GPUs")
    print(f"policy         {args.policy}")
    print(f"jobs           {len(jobs)} generated in {t_gen:.2f} s, {fin} finished")
    print(f"events         {res.events}")
    print(f"simulation     {t_sim:.2f} s wall  ->  {len(jobs) / t_sim:,.0f} jobs/s")
    print(f"decision time  p50 {np.percentile(dt, 50) * 1e6:.1f} us, p99 {np.percentile(dt, 99) * 1e6:.1f} us "
          f"over {dt.size} calls")
    print(f"whole run      {t_gen + t_sim:.2f} s (goal <= 60 s)")


if __name__ == "__main__":
    main()
