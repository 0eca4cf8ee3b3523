"""Per-job JCT of Parrot (S10 per coflow in LPCAS order) beside Aalo on the 60-job workload (docs/reproductions.md).

Runs ``fig5`` of ``reproduce_parrot.py`` for the two schemes (the same cluster, workload, placement
and paper rules: Parrot ``fill_order: lpcas, fill_residual: false``; Aalo greedy filling) and prints
the JCT difference per job (seconds; JCT = finish - arrival), grouped by the job's iteration count
at this scale, with the median lower bound per coflow (seconds: the job's O3 lower bound / its
2 x iterations coflows). Writes the per-job table to ``--out`` (CSV) if given.

    PYTHONPATH=. python scripts/diag_parrot_jobs.py --iteration-scale 0.01 --seed 1 [--gbps 10] [--out jobs.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytestbed.schedulers.base import make_policy  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.registry import load_workload  # noqa: E402
from scripts.reproduce_parrot import cluster  # noqa: E402

SCHEMES = {"parrot": {"fill_residual": False, "fill_order": "lpcas"}, "aalo": {"fill_residual": False}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iteration-scale", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gbps", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    cl = cluster(a.gbps)
    wl = {"iteration_scale": a.iteration_scale, "arrival_scale": a.iteration_scale}
    rows: dict[int, dict] = {}
    for scheme, params in SCHEMES.items():
        jobs = load_workload("ms60", dict(wl), cl, a.seed, ROOT)
        res = Simulator(cl, jobs, make_policy("fifo", "placement", a.seed, spread="random"),
                        make_policy(scheme, "network", a.seed, **params), mode="flow").run()
        for r in res.records:
            row = rows.setdefault(r.job.job_id, {"arrival_s": r.job.arrival_s, "iterations": r.job.iterations,
                                                 "lower_bound_s": r.lower_bound_s})
            row[f"{scheme}_jct_s"] = r.finish_s - r.job.arrival_s
    df = pd.DataFrame.from_dict(rows, orient="index").sort_values("arrival_s")
    df["parrot_minus_aalo_s"] = df.parrot_jct_s - df.aalo_jct_s
    df["lb_per_coflow_s"] = df.lower_bound_s / (2 * df.iterations)
    df["iterations_class"] = pd.cut(df.iterations, [0, 1, 3, 10, 10**9], labels=["1", "2-3", "4-10", ">10"])
    print(f"ms60, {a.gbps:g}G, iteration_scale {a.iteration_scale:g}, seed {a.seed}: total JCT Parrot "
          f"{df.parrot_jct_s.sum():.1f} s, Aalo {df.aalo_jct_s.sum():.1f} s, lower bound {df.lower_bound_s.sum():.1f} s")
    g = df.groupby("iterations_class", observed=True).agg(
        jobs=("parrot_jct_s", "size"), lb_per_coflow_median_s=("lb_per_coflow_s", "median"),
        parrot_s=("parrot_jct_s", "sum"), aalo_s=("aalo_jct_s", "sum"), parrot_minus_aalo_s=("parrot_minus_aalo_s", "sum"))
    print(g.round(2).to_string())
    if a.out is not None:
        df.to_csv(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
