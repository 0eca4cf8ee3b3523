"""How bursty the GADGET workload's arrivals are: Poisson vs trace-shaped (gadget.md GD-12).

Per arrival pattern, job count and seed: arrivals per 60-s slot over T = 200 slots (slots with
none, the most in one slot, coefficient of variation, share of the jobs in the busiest 10 % of
slots) and the share of gaps that are exactly 0 (simultaneous submissions). Writes a CSV and
prints the means over seeds. No simulation.

    PYTHONPATH=. python scripts/gadget_arrival_stats.py --out docs/gadget_results/X/arrival_stats.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from raytestbed.config import load_cluster
from raytestbed.traces.arrival_patterns import ARRIVAL_KINDS
from raytestbed.traces.registry import load_workload

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--counts", default="500,2000,4000")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--slots", type=int, default=200)
    args = ap.parse_args(argv)
    cluster = load_cluster(ROOT / "cluster_configs" / "gadget_fattree_50.yaml").build()
    rows = []
    for arr in ARRIVAL_KINDS:
        for n in (int(x) for x in args.counts.split(",")):
            for seed in (int(x) for x in args.seeds.split(",")):
                jobs = load_workload("gadget", dict(jobs=n, slots=args.slots, slot_s=60.0, arrivals=arr), cluster,
                                     seed, ROOT)
                a = np.array([j.arrival_s for j in jobs])
                per = np.bincount((a // 60).astype(int), minlength=args.slots)[:args.slots]
                top = max(1, args.slots // 10)
                rows.append(dict(arrivals=arr, jobs=n, seed=seed, last_arrival_s=a[-1],
                                 after_horizon=int((a >= args.slots * 60).sum()),
                                 slots_without_arrival=int((per == 0).sum()), max_per_slot=int(per.max()),
                                 cv_per_slot=per.std() / per.mean(),
                                 share_in_busiest_10pct_slots=np.sort(per)[-top:].sum() / n,
                                 simultaneous_share=float(np.mean(np.diff(a) == 0))))
    df = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(df.groupby(["arrivals", "jobs"]).mean(numeric_only=True).drop(columns="seed").round(3).to_string())


if __name__ == "__main__":
    main()
