"""Reproduce GADGET's Figs. 4–7 (INFOCOM'22, gadget.md §6) in the simulator, paper numbers beside ours.

* Fig. 4 — total utility sum_i mu_i(progress at T) vs number of jobs, for GADGET and
  the FIFO / DRF / LAS baselines (ring-forming placement), T = 200 slots of 60 s on
  cluster_configs/gadget_fattree_50.yaml, Poisson arrivals over the horizon (GD-12;
  ``--arrivals google|philly|aaic`` maps a real trace's submit times onto the same
  window instead -- ``google``: the Google 2011 trace the paper uses --, see
  raytestbed/traces/arrival_patterns.py). Three GADGET variants: ``gadget``
  (the paper's per-slot objective), ``gadget-tb`` (+1e-6 per worker tie-break:
  work conserving; at most 300 candidate jobs per slot, by pi/kappa, to bound its
  LP time) and ``gadget-env`` (pi from the sigmoid's least concave
  majorant); see raytestbed/schedulers/gadget.py.
* Figs. 5–6 — GADGET's embedded ratio (embedded / active jobs per slot, averaged
  over slots and seeds) vs node capacity (1 unit = 100 GPUs: every server's GPUs
  scaled so the cluster has 100 k GPUs) and edge capacity (1 unit: every link
  scaled so the mean ToR–core link is 200 Gbit/s).
* Fig. 7 — per-slot G-VNE utility / exact optimum (compact ILP = (12)–(19),
  HiGHS) on small slots: a 12-server part of the cluster, 4–24 active jobs with
  random progress; LP-RS-MDE as in Algorithm 2 (no fill), with the greedy fill,
  and the greedy heuristic alone.

Writes CSV + PNG per figure and report.md into --out.

    PYTHONPATH=. python scripts/reproduce_gadget.py --out results/gadget_repro [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from raytestbed.config import load_cluster  # noqa: E402
from raytestbed.core.cluster import Cluster  # noqa: E402
from raytestbed.core.timing import GadgetModel  # noqa: E402
from raytestbed.placement.gvne import SlotJob, solve_exact, solve_greedy, solve_lp_rs_mde  # noqa: E402
from raytestbed.placement.ring_embedding import Substrate, validate_embeddings  # noqa: E402
from raytestbed.placement.utility import job_utility, total_utility  # noqa: E402
from raytestbed.schedulers.base import make_policy  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.arrival_patterns import ARRIVAL_KINDS, ARRIVAL_TRACES  # noqa: E402
from raytestbed.traces.registry import load_workload  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SLOT_S = 60.0
VARIANTS = {
    "gadget": ("gadget", {}),
    "gadget-float": ("gadget", {"tiny_pi": "drop"}),
    "gadget-tb": ("gadget", {"tie_break": 1e-6, "max_jobs": 300}),
    "gadget-env": ("gadget", {"envelope": True}),
    "fifo-ring": ("fifo-ring", {}),
    "drf": ("drf", {}),
    "las": ("las", {}),
}
GBPS = 1e9 / 8


def run_policy(cluster: Cluster, jobs, variant: str, slots: int, seed: int):
    name, kw = VARIANTS[variant]
    pol = make_policy(name, "placement", seed, slot_s=SLOT_S, **kw)
    t0 = time.perf_counter()
    res = Simulator(cluster, jobs, pol, model=GadgetModel(per_worker_iterations=1), until_s=slots * SLOT_S).run()
    util = total_utility(jobs, res.iterations_done)
    done = sum(1 for j in jobs if res.iterations_done[j.job_id] >= j.extra["F"] - 1e-6)
    return util, done, pol, time.perf_counter() - t0


BUDGET_MODE = "iterations"  #: gadget.md GD-8; set by --budget-mode
ARRIVALS = "poisson"  #: gadget.md GD-12; set by --arrivals (poisson or a trace of arrival_patterns)


def workload(cluster, n: int, slots: int, seed: int):
    return load_workload("gadget", dict(jobs=n, slots=slots, slot_s=SLOT_S, budget_mode=BUDGET_MODE,
                                        arrivals=ARRIVALS), cluster, seed, ROOT)


def arrivals_text(arrivals: str) -> str:
    if arrivals == "poisson":
        return "Poisson arrivals over the horizon (Google arrivals unavailable, GD-12)"
    tr = ARRIVAL_TRACES[arrivals]
    what = ("the Google cluster trace's arrivals (the paper's pattern)" if arrivals == "google"
            else "trace-shaped arrivals (GD-12 substitution for the Google pattern)")
    return (f"{what}: the submit times "
            f"(`{tr.column}`) of N consecutive jobs of `{tr.file}`, start row drawn from the seed, mapped "
            "linearly onto the Poisson window (first at 0, last at T*(N-1)/N), same job parameters as with Poisson")


def fig4(cluster, counts, seeds, slots, variants, out: Path) -> pd.DataFrame:
    rows = []
    for n in counts:
        for seed in seeds:
            jobs = workload(cluster, n, slots, seed)
            for v in variants:
                u, done, pol, wall = run_policy(cluster, jobs, v, slots, seed)
                slot_wall = [s["wall_s"] for s in pol.slot_log if "wall_s" in s]
                rows.append(dict(jobs=n, seed=seed, policy=v, total_utility=u, finished=done, wall_s=wall,
                                 slot_wall_p50_s=float(np.median(slot_wall)) if slot_wall else math.nan,
                                 slot_wall_max_s=float(np.max(slot_wall)) if slot_wall else math.nan))
                print(f"fig4 jobs={n} seed={seed} {v:<10} U={u:10.1f} finished={done:5d} wall={wall:6.1f}s", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig4_utility.csv", index=False)
    plot_fig4(df, variants, out)
    return df


def plot_fig4(df: pd.DataFrame, variants, out: Path) -> None:
    """fig4_utility.png: mean total utility per job count and policy, min-max over seeds."""
    g = df.groupby(["jobs", "policy"])["total_utility"]
    mean, lo, hi = g.mean().unstack(), g.min().unstack(), g.max().unstack()
    fig, ax = plt.subplots(figsize=(6, 4))
    for v in variants:
        ax.errorbar(mean.index, mean[v], yerr=[mean[v] - lo[v], hi[v] - mean[v]], marker="o", capsize=3, label=v)
    ax.legend()
    ax.set_xlabel("number of jobs")
    ax.set_ylabel("total utility at T")
    ax.set_title("GADGET Fig. 4 (ours): total utility")
    plt.tight_layout()
    plt.savefig(out / "fig4_utility.png", dpi=120)
    plt.close()


def scale_nodes(cluster: Cluster, units: float) -> Cluster:
    target = 100.0 * units
    f = target / cluster.total_gpus
    servers = tuple(dataclasses.replace(s, gpus=max(1, int(round(s.gpus * f)))) for s in cluster.servers)
    return dataclasses.replace(cluster, servers=servers)


def scale_edges(cluster: Cluster, units: float) -> Cluster:
    mean_up = np.mean([r.uplink_bps for r in cluster.racks])
    f = units * 200 * GBPS / mean_up
    servers = tuple(dataclasses.replace(s, nic_egress_bps=s.nic_egress_bps * f, nic_ingress_bps=s.nic_ingress_bps * f)
                    for s in cluster.servers)
    racks = tuple(dataclasses.replace(r, uplink_bps=r.uplink_bps * f, downlink_bps=r.downlink_bps * f)
                  for r in cluster.racks)
    return dataclasses.replace(cluster, servers=servers, racks=racks)


def fig56(cluster, units, seeds, slots, n_jobs, variant, which: str, out: Path) -> pd.DataFrame:
    rows = []
    for k in units:
        c = scale_nodes(cluster, k) if which == "node" else scale_edges(cluster, k)
        for seed in seeds:
            jobs = workload(c, n_jobs, slots, seed)
            u, done, pol, wall = run_policy(c, jobs, variant, slots, seed)
            r = [s["embedded"] / s["active"] for s in pol.slot_log if s["active"] > 0]
            rc = [s.get("embedded_by_solver", s["embedded"]) / s["candidates"] for s in pol.slot_log
                  if s["candidates"] > 0]
            rows.append(dict(units=k, seed=seed, gpus=c.total_gpus, embedded_ratio=float(np.mean(r)),
                             embedded_of_candidates=float(np.mean(rc)) if rc else math.nan,
                             total_utility=u, wall_s=wall))
            print(f"fig{5 if which == 'node' else 6} {which} units={k} seed={seed} ratio={np.mean(r):.3f} "
                  f"U={u:.1f} wall={wall:.1f}s", flush=True)
    df = pd.DataFrame(rows)
    name = "fig5_node" if which == "node" else "fig6_edge"
    df.to_csv(out / f"{name}.csv", index=False)
    g = df.groupby("units")["embedded_ratio"]
    m, lo, hi = g.mean(), g.min(), g.max()
    mc = df.groupby("units")["embedded_of_candidates"].mean()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.errorbar(m.index, m.values, yerr=[m.values - lo.values, hi.values - m.values], marker="o", capsize=3,
                label="embedded / active (min-max over seeds)")
    ax.plot(mc.index, mc.values, marker="s", label="embedded / active with pi > tol")
    ax.set_xscale("log")
    ax.legend()
    ax.set_xlabel(f"{which} capacity (units: {'100 GPUs' if which == 'node' else 'mean ToR-core link = 200 Gbit/s'})")
    ax.set_ylabel("embedded / active jobs per slot")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"GADGET Fig. {5 if which == 'node' else 6} (ours)")
    plt.tight_layout()
    plt.savefig(out / f"{name}.png", dpi=120)
    plt.close()
    return df


def small_slot(cluster: Cluster, n_jobs: int, seed: int, family: str = "sigmoid") -> tuple[Cluster, list[SlotJob]]:
    """A 12-server part of the cluster and n_jobs active jobs with random progress.

    ``family``: ``sigmoid`` — pi from the raw sigmoid (most jobs far from lambda3 have pi ~ 0, so
    few jobs compete); ``envelope`` — pi from its concave envelope (every job has value per worker,
    so the slot is capacity-bound).
    """
    keep = list(range(12))
    racks_used = sorted({cluster.servers[m].rack for m in keep})
    servers = tuple(dataclasses.replace(cluster.servers[m], server_id=i) for i, m in enumerate(keep))
    racks = tuple(r for r in cluster.racks if r.rack_id in racks_used)
    c = Cluster(servers, cluster.intra_bps, racks, name="gadget-12")
    rng = np.random.default_rng(5000 + seed)
    jobs = load_workload("gadget", dict(jobs=n_jobs, slots=200, slot_s=SLOT_S), c, 10_000 + seed, ROOT)
    out = []
    for j in jobs:
        u = job_utility(j)
        budget = u.budget / u.zeta
        z = float(rng.integers(0, max(1, math.floor(budget))))
        q = min(int(j.extra["N"]), max(1, math.floor(budget - z + 1e-9)))
        x = u.zeta * z
        k = np.arange(1, q + 1)
        mu = u.mu_envelope if family == "envelope" else u.mu
        pi = np.maximum(np.atleast_1d(mu(np.minimum(x + u.zeta * k, u.budget))) - mu(x), 0.0)
        out.append(SlotJob(j.job_id, tuple(float(p) for p in pi), j.extra["b_bps"], j.extra["mem_gb"]))
    return c, out


def fig7(sizes, instances, time_limit, out: Path, cluster: Cluster) -> pd.DataFrame:
    rows = []
    for family in ("sigmoid", "envelope"):
        for n in sizes:
            for s in range(instances):
                c, jobs = small_slot(cluster, n, s, family)
                sub = Substrate.full(c)
                ex = solve_exact(jobs, sub, time_limit=time_limit)
                if ex.utility <= 1e-9:
                    continue
                sols = {"lp_rs_mde": solve_lp_rs_mde(jobs, sub, np.random.default_rng(s), fill=False),
                        "lp_rs_mde u_b=1": solve_lp_rs_mde(jobs, sub, np.random.default_rng(s), u_b=1, fill=False),
                        "lp_rs_mde+fill": solve_lp_rs_mde(jobs, sub, np.random.default_rng(s), fill=True),
                        "greedy": solve_greedy(jobs, sub)}
                for name, sol in sols.items():
                    validate_embeddings(sol.embeddings.values(), sub)
                    rows.append(dict(family=family, jobs=n, instance=s, solver=f"{name} [{family}]",
                                     utility=sol.utility, optimum=ex.utility, ratio=sol.utility / ex.utility,
                                     exact_proven=ex.optimal, lp_bound=sols["lp_rs_mde"].lp_bound,
                                     fallback=sol.fallback))
                print(f"fig7 {family} jobs={n} inst={s} "
                      + " ".join(f"{k}={v.utility / ex.utility:.3f}" for k, v in sols.items())
                      + f" (exact {ex.wall_s:.1f}s, proven={ex.optimal})", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig7_ratio.csv", index=False)
    m = df.groupby(["jobs", "solver"])["ratio"].mean().unstack()
    ax = m.plot(marker="o", figsize=(6, 4))
    ax.axhspan(0.6, 0.8, color="grey", alpha=0.2, label="paper: 60-80%")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("active jobs in the slot")
    ax.set_ylabel("utility / exact optimum")
    ax.legend()
    ax.set_title("GADGET Fig. 7 (ours): G-VNE approximation ratio")
    plt.tight_layout()
    plt.savefig(out / "fig7_ratio.png", dpi=120)
    plt.close()
    return df


def fig7_online(cluster: Cluster, n_jobs: int, slots: int, seed: int, every: int, time_limit: float,
                out: Path, variant: str = "gadget") -> pd.DataFrame:
    """Fig. 7 like the paper: the per-slot problems (12) that GADGET itself meets in an online run.

    Runs ``gadget`` (the paper's objective) on the full 50-server cluster and records the exact
    input of its solver (candidate jobs with their pi and ring-size candidates, full substrate) every
    ``every`` slots; each recorded slot is then solved by the exact compact ILP (HiGHS, time limit;
    with the solver's proven bound where it stops early) and by LP-RS-MDE without fill (u_b = 50 and
    a single rounding u_b = 1), on identical inputs.
    """
    import raytestbed.schedulers.gadget as gmod

    recorded = []
    orig = gmod.solve_slot
    counter = {"k": 0}

    def recording(jobs, sub, mode="lp_rs_mde", rng=None, **kw):
        if counter["k"] % every == 0 and len(jobs) >= 2:
            recorded.append((counter["k"], list(jobs), sub.copy()))
        counter["k"] += 1
        return orig(jobs, sub, mode, rng=rng, **kw)

    gmod.solve_slot = recording
    try:
        run_policy(cluster, workload(cluster, n_jobs, slots, seed), variant, slots, seed)
    finally:
        gmod.solve_slot = orig
    rows = []
    for k, jobs, sub in recorded:
        ex = solve_exact(jobs, sub, time_limit=time_limit)
        if ex.utility <= 1e-9:
            continue
        sols = {"lp_rs_mde": solve_lp_rs_mde(jobs, sub, np.random.default_rng(k), fill=False),
                "lp_rs_mde u_b=1": solve_lp_rs_mde(jobs, sub, np.random.default_rng(k), u_b=1, fill=False),
                "greedy": solve_greedy(jobs, sub)}
        for name, sol in sols.items():
            validate_embeddings(sol.embeddings.values(), sub)
            rows.append(dict(variant=variant, slot=k, candidates=len(jobs), solver=name, utility=sol.utility, optimum=ex.utility,
                             ratio=sol.utility / ex.utility, exact_proven=ex.optimal, lp_bound=sol.lp_bound,
                             clean_roundings=sol.clean_roundings, tries=sol.tries, exact_wall_s=ex.wall_s,
                             exact_mip_gap=ex.info.get("mip_gap")))
        print(f"fig7-online slot={k} candidates={len(jobs)} "
              + " ".join(f"{n}={v.utility / ex.utility:.3f}" for n, v in sols.items())
              + f" (exact {ex.wall_s:.1f}s, proven={ex.optimal})", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / f"fig7_online_{variant}.csv", index=False)
    return df


def report(out: Path, f4: pd.DataFrame, f5: pd.DataFrame, f6: pd.DataFrame, f7: pd.DataFrame, args) -> None:
    L = ["# GADGET reproduction (Figs. 4–7)", "",
         f"Command: `PYTHONPATH=. python scripts/reproduce_gadget.py {' '.join(args.argv)}`", "",
         f"Setting: cluster_configs/gadget_fattree_50.yaml (50 servers, 199 GPUs, 5 racks), T = {args.slots} slots "
         f"of 60 s, {arrivals_text(getattr(args, 'arrivals', 'poisson'))}, job parameters of §VI-1, "
         f"budget_mode = {args.budget_mode} (GD-8), sigmoid utility; utility scored with the true sigmoid at T.", "",
         "## Fig. 4 — total utility vs number of jobs", "",
         "Paper: GADGET clearly above FIFO, DRF and LAS, the gap growing with the number of jobs (no numbers in "
         "the text).", ""]
    g4 = f4.groupby(["jobs", "policy"])["total_utility"] if len(f4) else None
    m = g4.mean().unstack() if g4 is not None else pd.DataFrame()
    lo = g4.min().unstack() if g4 is not None else pd.DataFrame()
    hi = g4.max().unstack() if g4 is not None else pd.DataFrame()
    cols = [c for c in VARIANTS if c in m.columns]
    base = [c for c in cols if not c.startswith("gadget")]
    nseeds = f4["seed"].nunique() if len(f4) else 0
    L.append(f"Mean over {nseeds} seed(s) (min–max); last columns: each GADGET variant's mean / the best "
             "baseline's mean, and the smallest per-seed ratio.")
    L.append("")
    gcols = [c for c in cols if c.startswith("gadget")]
    L.append("| jobs | " + " | ".join(cols) + " | " + " | ".join(f"{g} / best baseline (min seed)" for g in gcols) + " |")
    L.append("|---" * (len(cols) + len(gcols) + 1) + "|")
    for n, r in m.iterrows():
        cells = [f"{r[c]:.0f} ({lo.loc[n, c]:.0f}–{hi.loc[n, c]:.0f})" if nseeds > 1 else f"{r[c]:.0f}" for c in cols]
        ratios = []
        for g in gcols:
            b = max(r[c] for c in base) if base else np.nan
            per = f4[f4["jobs"] == n].pivot(index="seed", columns="policy", values="total_utility")
            pmin = (per[g] / per[base].max(axis=1)).min() if base else np.nan
            ratios.append(f"{r[g] / b:.3f} ({pmin:.3f})")
        L.append(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    L += ["", "![fig4](fig4_utility.png)", ""]
    for name, df, paper in (("Fig. 5 — embedded ratio vs node capacity", f5, "rises with node (GPU) capacity"),
                            ("Fig. 6 — embedded ratio vs edge capacity", f6, "rises with edge (bandwidth) capacity")):
        if not len(df):  # skipped (--skip) or not run yet: no empty section
            continue
        L += [f"## {name}", "", f"Paper: the ratio {paper} (averaged over 3 trials; values only in the plot).", "",
              "Mean over seeds (min–max).", "",
              "| units | GPUs | embedded / active (ours) | embedded / active with pi > tol (ours) | total utility |",
              "|---|---|---|---|---|"]

        def cell(g, col, fmt):
            return f"{g[col].mean():{fmt}} ({g[col].min():{fmt}}–{g[col].max():{fmt}})"

        for k, g in df.groupby("units"):
            L.append(f"| {k} | {int(g['gpus'].iloc[0])} | {cell(g, 'embedded_ratio', '.3f')} | "
                     f"{cell(g, 'embedded_of_candidates', '.3f')} | {cell(g, 'total_utility', '.0f')} |")
        L += ["", f"![{name}]({'fig5_node' if 'node' in name else 'fig6_edge'}.png)", ""]
    if len(f7):
        L += ["## Fig. 7 — per-slot G-VNE utility / exact optimum", "",
              "Paper: 60%–80% of the Gurobi optimum.", "",
              "| active jobs | " + " | ".join(sorted(f7["solver"].unique())) + " |",
              "|---" * (1 + f7["solver"].nunique()) + "|"]
        m7 = f7.groupby(["jobs", "solver"])["ratio"].agg(["mean", "min"]).unstack()
        for n in sorted(f7["jobs"].unique()):
            L.append(f"| {n} | " + " | ".join(f"{m7.loc[n, ('mean', s)]:.3f} (min {m7.loc[n, ('min', s)]:.3f})"
                                              for s in sorted(f7["solver"].unique())) + " |")
        allm = f7.groupby("solver")["ratio"].mean()
        L += ["", "Over all instances: " + ", ".join(f"{s} {v:.3f}" for s, v in allm.items()) + ".", "",
              "![fig7](fig7_ratio.png)", ""]
    f7o = getattr(args, "f7o", None)
    if f7o is not None and len(f7o):
        L += ["### Fig. 7 on the slots of an online run (the paper's setting)", "",
              f"`{args.fig7_online_variant}` on the 50-server cluster, {args.fig7_online_jobs} jobs over {args.fig7_online_slots} slots, "
              f"every {args.fig7_online_every}th slot's solver input; {f7o['slot'].nunique()} slots, "
              f"{f7o['candidates'].min()}–{f7o['candidates'].max()} candidate jobs, exact proven optimal in "
              f"{int(f7o.groupby('slot')['exact_proven'].first().sum())}.", "",
              "Ratios over the slots whose exact optimum was proven (a time-limited incumbent is no optimum).", "",
              "| solver | mean ratio | min | max | slots with ratio < 0.999 |", "|---|---|---|---|---|"]
        for name, g in f7o[f7o["exact_proven"]].groupby("solver"):
            L.append(f"| {name} | {g['ratio'].mean():.3f} | {g['ratio'].min():.3f} | {g['ratio'].max():.3f} | "
                     f"{int((g['ratio'] < 0.999).sum())} |")
        L.append("")
    (out / "report.md").write_text("\n".join(L), encoding="utf-8")


def main(argv=None) -> None:
    import sys

    ap = argparse.ArgumentParser(description="Reproduce GADGET Figs. 4-7")
    ap.add_argument("--out", default="results/gadget_repro")
    ap.add_argument("--quick", action="store_true", help="small sweep (minutes)")
    ap.add_argument("--slots", type=int, default=200)
    ap.add_argument("--counts", default=None, help="Fig. 4 job counts, e.g. 500,1000,2000,3000,4000")
    ap.add_argument("--seeds", default=None, help="seeds, e.g. 1,2,3")
    ap.add_argument("--fig56-variant", default="gadget", choices=[v for v in VARIANTS if v.startswith("gadget")])
    ap.add_argument("--fig56-jobs", type=int, default=None)
    ap.add_argument("--fig56-slots", type=int, default=None, help="horizon of the Figs. 5-6 runs (default --slots)")
    ap.add_argument("--node-units", default=None, help="Fig. 5 node capacities in units of 100 GPUs, e.g. 1,2,4")
    ap.add_argument("--edge-units", default=None, help="Fig. 6 edge capacities in units of 200 Gbit/s, e.g. 0.1,1,4")
    ap.add_argument("--variants", default=None, help="Fig. 4 policies, e.g. gadget,gadget-env,fifo-ring,drf,las")
    ap.add_argument("--fig7-instances", type=int, default=None)
    ap.add_argument("--fig7-online-jobs", type=int, default=0, help="Fig. 7 on an online run's slots (0: skip)")
    ap.add_argument("--fig7-online-slots", type=int, default=50)
    ap.add_argument("--fig7-online-variant", default="gadget", choices=[v for v in VARIANTS if v.startswith("gadget")])
    ap.add_argument("--fig7-online-every", type=int, default=5)
    ap.add_argument("--budget-mode", default="iterations", choices=["iterations", "literal"],
                    help="F_i in worker-iterations (default, GD-8) or literally in worker-slots (never binds)")
    ap.add_argument("--arrivals", default="poisson", choices=list(ARRIVAL_KINDS),
                    help="arrival pattern: poisson (default) or a trace's submit times mapped onto the same window")
    ap.add_argument("--fig4-from", default=None,
                    help="comma list of fig4_utility.csv files of earlier runs (e.g. one per count and seed): "
                         "Fig. 4 is not run; their rows are concatenated into --out (CSV, PNG, report)")
    ap.add_argument("--skip", default="", help="comma list of figures to skip: 4,5,6,7")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    global BUDGET_MODE, ARRIVALS
    BUDGET_MODE = args.budget_mode
    ARRIVALS = args.arrivals
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(ROOT / "cluster_configs" / "gadget_fattree_50.yaml").build()
    q = args.quick
    counts = [int(x) for x in args.counts.split(",")] if args.counts else ([200, 800] if q else [500, 1000, 2000, 4000])
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [1]
    slots = args.slots if not q else min(args.slots, 60)
    skip = set(args.skip.split(",")) - {""}
    variants = args.variants.split(",") if args.variants else list(VARIANTS)
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"--variants: unknown {v!r} (known: {', '.join(VARIANTS)})")
    empty = pd.DataFrame(columns=["jobs", "policy", "total_utility", "units", "gpus", "embedded_ratio",
                                  "embedded_of_candidates", "solver", "ratio"])
    f4 = f5 = f6 = f7 = empty
    if "7" not in skip:  # cheapest first; the report is rewritten after every figure
        n7 = args.fig7_instances if args.fig7_instances is not None else (2 if q else 6)
        if n7 > 0:
            f7 = fig7([4, 8, 16] if q else [4, 8, 12, 16, 24], n7, 30.0, out, cluster)
        if args.fig7_online_jobs:
            args.f7o = fig7_online(cluster, args.fig7_online_jobs, args.fig7_online_slots, seeds[0],
                                   args.fig7_online_every, 60.0, out, args.fig7_online_variant)
        report(out, f4, f5, f6, f7, args)
    if args.fig4_from:
        f4 = pd.concat([pd.read_csv(p) for p in args.fig4_from.split(",")], ignore_index=True)
        counts4 = f4.groupby(["jobs", "seed", "policy"]).size()
        if (counts4 > 1).any():
            (n4, s4, p4), k4 = next((k, v) for k, v in counts4.items() if v > 1)
            raise SystemExit(f"--fig4-from: jobs={n4} seed={s4} policy={p4} appears {k4} times")
        f4 = f4.sort_values(["jobs", "seed", "policy"], kind="stable").reset_index(drop=True)
        f4.to_csv(out / "fig4_utility.csv", index=False)
        plot_fig4(f4, [v for v in variants if v in set(f4["policy"])], out)
        report(out, f4, f5, f6, f7, args)
    elif "4" not in skip:
        f4 = fig4(cluster, counts, seeds, slots, variants, out)
        report(out, f4, f5, f6, f7, args)
    n56 = args.fig56_jobs or (300 if q else 4000)
    s56 = args.fig56_slots or slots
    nu = [float(x) for x in args.node_units.split(",")] if args.node_units else ([1, 2] if q else [0.5, 1, 2, 4])
    eu = [float(x) for x in args.edge_units.split(",")] if args.edge_units else ([0.25, 1] if q else [0.1, 0.25, 1, 4])
    if "5" not in skip:
        f5 = fig56(cluster, nu, seeds, s56, n56, args.fig56_variant, "node", out)
        report(out, f4, f5, f6, f7, args)
    if "6" not in skip:
        f6 = fig56(cluster, eu, seeds, s56, n56, args.fig56_variant, "edge", out)
        report(out, f4, f5, f6, f7, args)
    print(f"wrote {out}/report.md")


if __name__ == "__main__":
    main()
