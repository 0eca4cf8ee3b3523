"""Cross-check of the flow simulator against CoflowSim on the Facebook coflow benchmark.

Runs our network policies on all 526 FB2010 coflows (150 ports, sizes in MiB as CoflowSim reads
them, FIFO placement, seed 1) at the given port rates, with exact arrivals (epoch 0) and with
CoflowSim's 10.24 s admission epochs, and prints per run: the average CCT (s), the wall seconds,
the Varys bins (short/long: longest flow < 5 MiB or not; narrow/wide: <= 50 flows or more) with
the average CCT and slowdown (CCT / the coflow's stand-alone optimum, the Parrot paper's eq. 26) per bin.

With ``--coflowsim DIR`` it also reads CoflowSim's per-coflow output, files
``{FAIR,DARK,SEBF}_{1g,10g}_{10240,8}.txt`` (the stdout of ``CoflowSim ALGO COFLOW-BENCHMARK
FB2010-1Hr-150-0.txt``; 1g: its 2^30 bit/s per 1,024 ms ports; 10g: RACK_BITS_PER_SEC =
10.24e9; quantum 8 ms; last part of the name: its admission epoch in trace-ms, 10240 = its
default, 8 = one quantum), prints our average beside its average and the difference, and lists
the coflows with the largest CCT gaps for each pair (``--gaps N``). Per-coflow CCTs of every run
go to ``--out DIR/ours_<policy>_<rate>_<epoch>.csv``.

    raytestbed bench crosscheck-coflowsim --gbps 1.048576,10 --coflowsim COFLOWSIM_OUTPUT_DIR --out results/xcheck
    PYTHONPATH=. python scripts/crosscheck_coflowsim.py --gbps 1.048576,10 --coflowsim COFLOWSIM_OUTPUT_DIR --out results/xcheck
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from raytestbed.resources import package_root
from raytestbed.config import ClusterConfig, ServerGroup
from raytestbed.core.job import admit_in_epochs
from raytestbed.results.tables import md_table
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload

MIB = 1048576.0
#: ours (policy, parameters) -> the CoflowSim algorithm it is compared with
RUNS = {
    "fair": ("fair", {}, "FAIR"),
    "aalo": ("aalo", {}, "DARK"),
    "aalo-q10": ("aalo", {"queues": 10}, "DARK"),
    "aalo-dark": ("aalo", {"queues": 10, "coflow_rates": "port_share"}, "DARK"),
    "varys": ("varys", {}, "SEBF"),
    "varys-total": ("varys", {"sebf_bytes": "total"}, "SEBF"),
    "varys-cfs": ("varys", {"sebf_bytes": "total", "backfill_style": "coflowsim"}, "SEBF"),
    "parrot": ("parrot", {}, "-"),
}
EPOCHS = {0.0: "8", 10.24: "10240"}  # our epoch (s) -> the CoflowSim file's epoch (trace-ms)


def varys_bin(job) -> str:
    flows = job.traffic.coflows[0]
    longest = max(b for _, _, b in flows)
    return ("S" if longest < 5 * MIB else "L") + ("N" if len(flows) <= 50 else "W")


def run(name: str, gbps: float, epoch: float) -> tuple[dict[int, tuple[float, float, str]], float, float]:
    """Our run: {coflow id: (CCT s, slowdown, Varys bin)}, wall and CPU seconds of the simulation."""
    policy, params, _ = RUNS[name]
    cl = ClusterConfig(name="fb150", nic_gbps=gbps, intra_gbytes_per_s=300,
                       servers=[ServerGroup(count=150, gpus=8)]).build()
    jobs = admit_in_epochs(load_workload("fb_coflow", {"mb_bytes": MIB}, cl, 1, package_root()), epoch)
    t0, c0 = time.perf_counter(), time.process_time()
    res = Simulator(cl, jobs, make_policy("fifo", "placement", 1), make_policy(policy, "network", 1, **params),
                    mode="flow").run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {}
    for r in res.records:
        cct = r.finish_s - r.job.arrival_s
        out[r.job.job_id] = (cct, cct / r.lower_bound_s if r.lower_bound_s > 0 else math.nan, varys_bin(r.job))
    return out, wall, cpu


def read_coflowsim(path: Path) -> dict[int, float]:
    """CoflowSim's per-coflow CCT (seconds = its trace-ms / 1000) from its printStats lines."""
    out = {}
    for line in path.read_text().splitlines():
        tok = line.split()
        if len(tok) >= 8 and tok[0].startswith("JOB-"):
            out[int(tok[0][4:])] = float(tok[7]) / 1000.0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gbps", default="1.048576,10", help="port rates, Gbit/s (comma list)")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma list of {', '.join(RUNS)}")
    ap.add_argument("--epochs", default="0,10.24", help="admission epochs, seconds (comma list)")
    ap.add_argument("--coflowsim", type=Path, default=None, help="folder of CoflowSim outputs (see above)")
    ap.add_argument("--gaps", type=int, default=5, help="coflows with the largest gaps to list per pair")
    ap.add_argument("--out", type=Path, default=None, help="folder for per-coflow CSVs")
    a = ap.parse_args(argv)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    print("| rate Gbit/s | ours | epoch s | avg CCT s | wall s | CPU s | CoflowSim | its avg CCT s | ours vs it |")
    print("|---|---|---|---|---|---|---|---|---|")
    gaps = []
    bins_rows = []
    for gbps in (float(x) for x in a.gbps.split(",")):
        tag = "1g" if gbps < 5 else "10g"
        for epoch in (float(x) for x in a.epochs.split(",")):
            for name in a.runs.split(","):
                ours, wall, cpu = run(name, gbps, epoch)
                avg = float(np.mean([v[0] for v in ours.values()]))
                algo = RUNS[name][2]
                theirs_txt = diff_txt = "-"
                f = a.coflowsim / f"{algo}_{tag}_{EPOCHS.get(epoch, '?')}.txt" if a.coflowsim and algo != "-" else None
                if f is not None and f.exists():
                    theirs = read_coflowsim(f)
                    if len(theirs) == len(ours):
                        t_avg = float(np.mean(list(theirs.values())))
                        theirs_txt, diff_txt = f"{t_avg:.3f}", f"{100 * (avg / t_avg - 1):+.1f} %"
                        pairs = sorted(ours, key=lambda c: -abs(ours[c][0] - theirs[c]))[:a.gaps]
                        gaps.append((f"{gbps:g} Gbit/s, epoch {epoch:g} s: {name} vs {algo}",
                                     [(c, ours[c][0], theirs[c], ours[c][2]) for c in pairs],
                                     sum(ours[c][0] - theirs[c] for c in ours) / len(ours)))
                print(f"| {gbps:g} | {name} | {epoch:g} | {avg:.3f} | {wall:.1f} | {cpu:.1f} | {algo} | {theirs_txt} | {diff_txt} |",
                      flush=True)
                by = {}
                for cct, slow, b in ours.values():
                    by.setdefault(b, []).append((cct, slow))
                bins_rows.append((gbps, name, epoch, {b: (len(v), np.mean([x[0] for x in v]), np.nanmean([x[1] for x in v]))
                                                      for b, v in sorted(by.items())}))
                if a.out:
                    with open(a.out / f"ours_{name}_{tag}_{epoch:g}.csv", "w", newline="") as fh:
                        w = csv.writer(fh)
                        w.writerow(["coflow", "cct_s", "slowdown", "varys_bin"])
                        for c in sorted(ours):
                            w.writerow([c, repr(ours[c][0]), repr(ours[c][1]), ours[c][2]])
    print("\nVarys bins (count, avg CCT s, avg slowdown = CCT / stand-alone optimum):\n")
    print(md_table(pd.DataFrame([
        {"rate Gbit/s": f"{gbps:g}", "ours": name, "epoch s": f"{epoch:g}",
         **{b: f"{by[b][0]}: {by[b][1]:.3g} s, x{by[b][2]:.2f}" if b in by else "-" for b in ("SN", "LN", "SW", "LW")}}
        for gbps, name, epoch, by in bins_rows], columns=["rate Gbit/s", "ours", "epoch s", "SN", "LN", "SW", "LW"])))
    for title, rows, mean_gap in gaps:
        print(f"\n{title}: mean per-coflow gap {mean_gap:+.3f} s; largest gaps (coflow, ours s, CoflowSim s, bin):")
        for c, x, y, b in rows:
            print(f"  {c}: {x:.3f} vs {y:.3f} ({b})")
    return 0
