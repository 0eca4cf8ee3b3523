"""Reproduce Parrot's evaluation (spec parrot.md §6) on the flow simulator.

Experiments (each policy pair is ``fifo`` with random distinct placement + a network policy):

* fig5: total JCT per scheme on the 60-job Microsoft workload at 10 and 40 Gbps,
  with the lower bound (sum over jobs of their coflows' O3 times, Thm 3), and
  (Fig. 6) the CDF of the jobs' JCTs;
* fig7: the same runs with observation interval eta (ms) swept: events are seen
  only at multiples of eta (spec PR-11), every scheme;
* fig8: Parrot's theta_max swept (Aalo and LCCF, which have no theta, run once
  per link speed and are the reference of every row);
* fig9: the 100-job Poisson workload, mean gap mu (seconds) swept;
* fig10: PSs per job uniform in [1, Delta], Delta swept;
* fb: the Facebook coflow benchmark as single-coflow jobs (150-port cluster).

Scale (spec PR-10): ``iteration_scale`` simulates that fraction of each job's
trace iterations; ``arrival_scale`` (default = iteration_scale) compresses the
trace arrivals (fig5, fig10) by the same factor, so the overlap of jobs, i.e. the
load, is that of the full trace while the event count drops by 1/iteration_scale.
Fig. 9's Poisson gaps mu are used as printed (simulated seconds) unless
``--fig9-arrival-scale`` says otherwise.

Variants (all reproducible from the command line): ``--fill-order lpcas``
(default: Parrot's S10 as one factor per coflow in LPCAS order after the global
factor, our reading of Alg. 1 S10) or ``--fill-order none`` (the paper-literal
single global factor), ``--fill-residual`` (every work-conserving scheme also
shares leftover capacity by max-min; an extension, off by default),
``--zero-coflows``, ``--theta-mode`` (spec PR-1, Fig. 2). No flag = the reported
configuration, the policies' own defaults (Parrot S10 per coflow in LPCAS order;
Aalo/LCCF greedy priority filling as the paper describes them; no max-min). The
flag defaults were the paper-literal ``--fill-order none`` before 2026-11-24;
every command in docs/reproductions.md names ``--fill-order`` explicitly.

Writes ``OUT/parrot_results.csv`` (one row per run), ``OUT/parrot_jobs.csv`` (one row
per job and run: JCT and lower bound, seconds), ``OUT/parrot_<fig>.png`` for every
experiment run (``parrot_fig6_cdf.png`` with fig5) and ``OUT/parrot_reproduction.md``
(ours beside the paper's).

    PYTHONPATH=. python scripts/reproduce_parrot.py --out results/parrot [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytestbed.config import ClusterConfig, ServerGroup, load_cluster  # noqa: E402
from raytestbed.schedulers.base import make_policy  # noqa: E402
from raytestbed.schedulers.coflow_base import FILL_RESIDUAL_DEFAULT  # noqa: E402
from raytestbed.schedulers.parrot import FILL_ORDER_DEFAULT  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.datadir import find_data_dir as data_dir  # noqa: E402
from raytestbed.traces.registry import load_workload  # noqa: E402

SCHEMES = ["parrot", "parrot-wo-wc", "aalo", "aalo-wo-wc", "lccf", "lccf-wo-wc"]
MAIN = ["parrot", "aalo", "lccf"]
EXPERIMENTS = ["fig5", "fig7", "fig8", "fig9", "fig10", "fb"]

PAPER = {
    "fig5": "Parrot closest to LB (at most 2.75x LB); up to 58.4% below Aalo and 91.3% below LCCF "
            "(10G and 40G); smaller gains at 40G; LCCF worse than Aalo; -wo-WC worse than each scheme",
    "fig6": "10G: 78.3% of jobs finish in < 10 s with Parrot, 48.3% with Aalo, 8.3% with LCCF",
    "fig7": "total JCT grows with eta for every scheme except LCCF; Parrot falls behind Aalo once eta reaches "
            "50 ms (10G) / 10 ms (40G); typical systems use <= 10 ms",
    "fig8": "lower total JCT for theta_max < 0.75; at 0.9 still better than Aalo and LCCF",
    "fig9": "10G: Parrot always best, up to 61.6% below Aalo and 80.9% below LCCF; 40G: Aalo ~ Parrot",
    "fig10": "Parrot best everywhere; 10G (40G): up to 51.9% (2.9%) below Aalo, 73.2% (61.6%) below LCCF; "
             "Parrot 1.26x - 2.6x LB",
}


def cluster(gbps: float, servers: int = 128):
    return ClusterConfig(name=f"parrot_{servers}_{gbps:g}g", nic_gbps=gbps, intra_gbytes_per_s=300,
                         servers=[ServerGroup(count=servers, gpus=8)]).build()


def run_one(exp: str, scheme: str, gbps: float, kind: str, wl: dict, seed: int, servers: int = 128,
            net_params: dict | None = None) -> dict:
    cl = cluster(gbps, servers)
    jobs = load_workload(kind, dict(wl), cl, seed, ROOT)
    fifo = make_policy("fifo", "placement", seed, spread="random")
    net = make_policy(scheme, "network", seed, **(net_params or {}))
    t0 = time.perf_counter()
    res = Simulator(cl, jobs, fifo, net, mode="flow").run()
    wall = time.perf_counter() - t0
    jct = [r.finish_s - r.job.arrival_s for r in res.records]
    lb = [r.lower_bound_s for r in res.records]
    dt = pd.Series(res.decision_times_s)
    per_job = [{"job_id": r.job.job_id, "jct_s": j, "lower_bound_s": b} for r, j, b in zip(res.records, jct, lb)]
    return {"per_job": per_job, "experiment": exp, "scheme": scheme, "pair": f"fifo+{scheme}", "gbps": gbps,
            "kind": kind,
            **{k: v for k, v in wl.items() if k in ("iteration_scale", "arrival_scale", "max_coflow_mb", "mean_gap_s",
                                                    "ps_max", "jobs", "limit")},
            "eta_ms": 1e3 * (net.observe_interval_s or 0.0), "theta_max": getattr(net, "theta_max", math.nan),
            "jobs_n": len(jobs), "unfinished": sum(math.isnan(x) for x in jct),
            "total_jct_s": float(sum(jct)), "total_lower_bound_s": float(sum(lb)),
            "ratio_to_lb": float(sum(jct) / sum(lb)), "frac_jct_lt_10s": float(sum(x < 10 for x in jct) / len(jct)),
            "decision_p50_ms": float(dt.quantile(0.5) * 1e3), "events": res.events, "wall_s": wall}


def reductions(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Parrot's total JCT reduction vs Aalo and LCCF per setting (1 - parrot / other)."""
    rows = []
    for key, g in df.groupby(keys):
        t = g.set_index("scheme")["total_jct_s"]
        if "parrot" not in t:
            continue
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        for other in ("aalo", "lccf"):
            if other in t:
                row[f"parrot_vs_{other}_%"] = 100 * (1 - t["parrot"] / t[other])
        row["parrot_x_lb"] = float(g.set_index("scheme").loc["parrot", "ratio_to_lb"])
        rows.append(row)
    return pd.DataFrame(rows)


def theta_table(d: pd.DataFrame) -> pd.DataFrame:
    """Fig. 8: Parrot per theta_max against the one Aalo / LCCF run of the same link speed."""
    rows = []
    for gbps, g in d.groupby("gbps"):
        ref = g[g.scheme != "parrot"].set_index("scheme")["total_jct_s"]
        for _, r in g[g.scheme == "parrot"].sort_values("theta_max").iterrows():
            row = {"gbps": gbps, "theta_max": r.theta_max, "parrot_total_jct_s": r.total_jct_s}
            for other in ("aalo", "lccf"):
                if other in ref:
                    row[f"{other}_total_jct_s"] = ref[other]
                    row[f"parrot_vs_{other}_%"] = 100 * (1 - r.total_jct_s / ref[other])
            row["parrot_x_lb"] = r.ratio_to_lb
            rows.append(row)
    return pd.DataFrame(rows)


def md_table(df: pd.DataFrame) -> str:
    """A Markdown table (floats to 4 significant digits)."""
    fmt = (lambda v: f"{v:.4g}" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def bar_plot(df: pd.DataFrame, x: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    piv = df.pivot_table(index=x, columns="scheme", values="total_jct_s", aggfunc="first")
    lb = df.groupby(x)["total_lower_bound_s"].first()
    piv["lower bound"] = lb
    ax = piv.plot.bar(figsize=(8, 4), logy=True)
    ax.set_ylabel("total JCT (s)")
    ax.set_title(title)
    plt.tight_layout()
    plt.savefig(path, dpi=110)
    plt.close()


def line_plot(df: pd.DataFrame, x: str, path: Path, title: str, xlabel: str) -> None:
    """Total JCT against a swept parameter, one line per (scheme, link speed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colour = {s: f"C{i}" for i, s in enumerate(sorted(df.scheme.unique()))}
    marker = {g: m for g, m in zip(sorted(df.gbps.unique()), "os^v")}
    for (gbps, scheme), g in df.groupby(["gbps", "scheme"]):
        g = g.sort_values(x)
        label = f"{scheme} {gbps:g}G"
        if g[x].isna().all():  # a scheme without the parameter: a flat reference line
            ax.axhline(g.total_jct_s.iloc[0], ls="--", lw=1, label=label, color=colour[scheme])
        else:
            ax.plot(g[x], g.total_jct_s, marker=marker[gbps], label=label, color=colour[scheme])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("total JCT (s)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cdf_plot(jobs: pd.DataFrame, path: Path, title: str) -> None:
    """Fig. 6: CDF of the jobs' JCT (seconds, log axis) per scheme and link speed, with the lower bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    speeds = sorted(jobs.gbps.unique())
    fig, axes = plt.subplots(1, len(speeds), figsize=(5 * len(speeds), 4), squeeze=False)
    for ax, gbps in zip(axes[0], speeds):
        d = jobs[jobs.gbps == gbps]
        curves = [(s, g.jct_s) for s, g in d.groupby("scheme")]
        curves.append(("lower bound", d[d.scheme == d.scheme.iloc[0]].lower_bound_s))
        for label, v in curves:
            v = np.sort(v.to_numpy())
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=label)
        ax.axvline(10, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("JCT (s)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"{title}, {gbps:g}G")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "parrot")
    ap.add_argument("--quick", action="store_true", help="small scale, main schemes only (a few minutes)")
    ap.add_argument("--iteration-scale", type=float, default=None,
                    help="fraction of the trace's iterations simulated (default 0.01; --quick 0.002)")
    ap.add_argument("--max-coflow-mb", type=float, default=1000.0,
                    help="trace workloads: flow-size cap L of the job with the longest iteration, MB (paper: 1000)")
    ap.add_argument("--arrival-scale", type=float, default=None,
                    help="factor on the trace's arrival times for fig5, fig7, fig8, fig10 (default: the iteration "
                         "scale, i.e. the full trace's job overlap; larger = lighter load)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="fig5,fig9,fig10,fb",
                    help="comma list of experiments: fig5 (with the Fig. 6 CDF), fig7, fig8, fig9, fig10, fb")
    ap.add_argument("--fill-residual", action=argparse.BooleanOptionalAction,
                    default=FILL_RESIDUAL_DEFAULT,
                    help="work-conserving schemes also fill residual capacity by max-min (an extension; default "
                         "off: Parrot's S10 as --fill-order says, Aalo/LCCF greedy filling)")
    ap.add_argument("--fill-order", choices=("none", "lpcas"), default=FILL_ORDER_DEFAULT,
                    help="Parrot only: 'lpcas' (default, the policy's default and the reported configuration) adds a "
                         "greedy pass after the global factor, coflow by coflow in LPCAS order (our reading of Alg. 1 "
                         "S10); 'none' = the paper-literal single global factor")
    ap.add_argument("--zero-coflows", choices=("inf", "plus_one"), default="inf",
                    help="Parrot only: A_m for a job with no completed coflow (spec PR-1)")
    ap.add_argument("--theta-mode", choices=("eq10", "max"), default="eq10", help="Parrot only: eq. 10 or theta_max")
    ap.add_argument("--schemes", default=None, help="comma list of schemes (default: all six, --quick: 3)")
    ap.add_argument("--gbps", default="10,40", help="fig5 link speeds, Gbit/s (comma list)")
    ap.add_argument("--etas", default="1,10,50,100",
                    help="fig7 observation intervals eta, ms (paper: 1-100); link speeds from --gbps")
    ap.add_argument("--theta-maxes", default="0.55,0.65,0.75,0.85,0.9,0.95",
                    help="fig8 Parrot theta_max values (paper: 0.55-0.95); link speeds from --gbps")
    ap.add_argument("--mus", default=None, help="fig9 mean gaps, seconds (default 0.1,0.4,1.0; --quick 0.1,1.0)")
    ap.add_argument("--fig9-jobs", type=int, default=100, help="fig9 number of jobs (paper: 100)")
    ap.add_argument("--fig9-gbps", default="10", help="fig9 link speeds, Gbit/s (comma list; paper: 10,40)")
    ap.add_argument("--fig9-arrival-scale", type=float, default=1.0,
                    help="fig9: factor on the Poisson gaps (default 1: mu in simulated seconds as the paper "
                         "prints it, jobs of iteration_scale x trace iterations)")
    ap.add_argument("--deltas", default=None, help="fig10 Delta values (default 1,4,16; --quick 1,8)")
    ap.add_argument("--fig10-gbps", default="10", help="fig10 link speeds, Gbit/s (comma list; paper: 10,40)")
    ap.add_argument("--fb-limit", type=int, default=None, help="fb: first N coflows (default 150; --quick 30)")
    ap.add_argument("--fb-arrival-scale", type=float, default=1.0,
                    help="fb: factor on the trace's arrival times (< 1 compresses them: more overlap)")
    return ap


def float_list(ap: argparse.ArgumentParser, flag: str, text: str, lo: float, hi: float) -> list[float]:
    """A comma list of numbers in [lo, hi]; a parser error naming the flag otherwise."""
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        ap.error(f"{flag}: expected a comma list of numbers, got {text!r}")
    bad = [v for v in vals if not lo <= v <= hi]
    if bad:
        ap.error(f"{flag}: values must lie in [{lo:g}, {hi:g}], got {bad}")
    return vals


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    etas = float_list(ap, "--etas", a.etas, 0.0, 1e5)
    thetas = float_list(ap, "--theta-maxes", a.theta_maxes, 1e-6, 1 - 1e-6)
    scale = a.iteration_scale if a.iteration_scale is not None else (0.002 if a.quick else 0.01)
    arrival_scale = scale if a.arrival_scale is None else a.arrival_scale
    if not (scale > 0 and arrival_scale > 0 and a.max_coflow_mb > 0):
        ap.error(f"--iteration-scale, --arrival-scale and --max-coflow-mb must be > 0, got {scale}, "
                 f"{arrival_scale} and {a.max_coflow_mb}")
    only = set(a.only.split(","))
    if only - set(EXPERIMENTS):
        ap.error(f"--only: unknown experiment(s) {sorted(only - set(EXPERIMENTS))} (known: {', '.join(EXPERIMENTS)};"
                 f" fig6 is drawn with fig5)")
    if data_dir() is None:
        print("no data directory (set RAYTESTBED_DATA_DIR)", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    base = {"iteration_scale": scale, "arrival_scale": arrival_scale, "max_coflow_mb": a.max_coflow_mb}
    rows, job_rows = [], []

    parrot_params = {"fill_order": a.fill_order, "zero_coflows": a.zero_coflows, "theta_mode": a.theta_mode}
    variant = (f"residual max-min fill: {a.fill_residual}; Parrot fill_order: {a.fill_order}, "
               f"zero_coflows: {a.zero_coflows}, theta_mode: {a.theta_mode}")

    def go(exp, scheme, *args, extra=None, **kw):
        net_params = {"fill_residual": a.fill_residual, **(parrot_params if scheme.startswith("parrot") else {}),
                      **(extra or {})}
        r = run_one(exp, scheme, *args, net_params=net_params, **kw)
        job_rows.extend({k: r[k] for k in ("experiment", "scheme", "gbps", "eta_ms", "theta_max",
                                           *(x for x in ("mean_gap_s", "ps_max", "limit") if x in r))} | j
                        for j in r.pop("per_job"))
        r["fill_residual"] = a.fill_residual
        if scheme.startswith("parrot"):
            # the policy's effective fill_order (parrot-wo-wc has no S10 pass: 'none', as before)
            pol = make_policy(scheme, "network", **net_params)
            r.update(parrot_params, fill_order=pol.fill_order if pol.work_conserving else "none")
        setting = {k: r[k] for k in ("mean_gap_s", "ps_max", "limit") if k in r}
        setting |= {"eta_ms": r["eta_ms"]} if r["eta_ms"] else {}
        setting |= {"theta_max": r["theta_max"]} if "theta_max" in (extra or {}) else {}
        print(f"{r['experiment']:6s} {r['scheme']:13s} {r['gbps']:>4g}G {setting} "
              f"total JCT {r['total_jct_s']:10.2f} s  LB {r['total_lower_bound_s']:10.2f} s  "
              f"x{r['ratio_to_lb']:.2f}  ({r['wall_s']:.0f} s wall)", flush=True)
        rows.append(r)
        pd.DataFrame(rows).to_csv(a.out / "parrot_results.csv", index=False)
        pd.DataFrame(job_rows).to_csv(a.out / "parrot_jobs.csv", index=False)

    schemes = a.schemes.split(",") if a.schemes else (MAIN if a.quick else SCHEMES)
    if "fig5" in only:
        for gbps in (float(x) for x in a.gbps.split(",")):
            for s in schemes:
                go("fig5", s, gbps, "ms60", base, a.seed)
    if "fig7" in only:
        for gbps in (float(x) for x in a.gbps.split(",")):
            for eta in etas:
                for s in schemes:
                    go("fig7", s, gbps, "ms60", base, a.seed, extra={"observe_interval_s": eta / 1e3 or None})
    if "fig8" in only:
        for gbps in (float(x) for x in a.gbps.split(",")):
            for s in [x for x in schemes if x in MAIN]:
                for theta in (thetas if s == "parrot" else [None]):
                    go("fig8", s, gbps, "ms60", base, a.seed, extra={"theta_max": theta} if theta else None)
    if "fig9" in only:
        mus = [float(x) for x in a.mus.split(",")] if a.mus else ((0.1, 1.0) if a.quick else (0.1, 0.4, 1.0))
        for mu, gbps in ((m, float(g)) for g in a.fig9_gbps.split(",") for m in mus):
            for s in [x for x in schemes if x in MAIN]:
                go("fig9", s, gbps, "ms60_poisson", {**base, "arrival_scale": a.fig9_arrival_scale,
                                                    "mean_gap_s": mu, "jobs": a.fig9_jobs},
                   a.seed)
    if "fig10" in only:
        deltas = [int(x) for x in a.deltas.split(",")] if a.deltas else ((1, 8) if a.quick else (1, 4, 16))
        for delta in deltas:
            for s in [x for x in schemes if x in MAIN]:
                for gbps in (float(x) for x in a.fig10_gbps.split(",")):
                    go("fig10", s, gbps, "ms60", {**base, "ps_max": delta}, a.seed)
    if "fb" in only:
        for s in [x for x in schemes if x in MAIN]:
            go("fb", s, 10, "fb_coflow", {"limit": a.fb_limit or (30 if a.quick else 150),
                                           "arrival_scale": a.fb_arrival_scale}, a.seed, servers=150)

    df = pd.DataFrame(rows)
    df.to_csv(a.out / "parrot_results.csv", index=False)
    md = [f"# Parrot reproduction (iteration_scale = {scale}, arrival_scale = {arrival_scale}, max_coflow_mb = "
          f"{a.max_coflow_mb:g} for the trace "
          f"workloads; seed {a.seed}; {variant})", "",
          "Command: `PYTHONPATH=. python scripts/reproduce_parrot.py " + " ".join(argv if argv is not None
                                                                             else sys.argv[1:]) + "`", ""]
    jobs_df = pd.DataFrame(job_rows)
    for exp, keys in (("fig5", ["gbps"]), ("fig7", ["gbps", "eta_ms"]), ("fig8", ["gbps", "theta_max"]),
                      ("fig9", ["gbps", "mean_gap_s"]), ("fig10", ["gbps", "ps_max"]), ("fb", ["gbps"])):
        d = df[df.experiment == exp] if len(df) else df
        if not len(d):
            continue
        md += [f"## {exp}", "", f"Paper: {PAPER.get(exp, 'no paper numbers (our extra run)')}", ""]
        if exp == "fig5":
            md += [f"Paper (Fig. 6): {PAPER['fig6']}", ""]
        cols = ["scheme", *keys, "total_jct_s", "total_lower_bound_s", "ratio_to_lb", "frac_jct_lt_10s",
                "decision_p50_ms", "wall_s"]
        md += [md_table(d[[c for c in cols if c in d]]), ""]
        red = theta_table(d) if exp == "fig8" else reductions(d, keys)
        if len(red):
            md += ["Parrot's reduction of total JCT (positive = Parrot better):", "",
                   md_table(red), ""]
        if exp in ("fig7", "fig8"):
            line_plot(d, keys[1], a.out / f"parrot_{exp}.png", f"Parrot {exp}: total JCT",
                      {"eta_ms": "observation interval eta (ms)", "theta_max": "theta_max"}[keys[1]])
        elif exp != "fb":
            bar_plot(d, keys if len(keys) > 1 else keys[0], a.out / f"parrot_{exp}.png",
                     f"Parrot {exp}: total JCT (log scale)")
        if exp != "fb":
            md += [f"![{exp}](parrot_{exp}.png)", ""]
        if exp == "fig5":
            cdf_plot(jobs_df[jobs_df.experiment == "fig5"], a.out / "parrot_fig6_cdf.png", "JCT CDF (Fig. 6)")
            md += ["![fig6](parrot_fig6_cdf.png)", ""]
    (a.out / "parrot_reproduction.md").write_text("\n".join(md), encoding="utf-8")
    print(f"wrote {a.out}/parrot_reproduction.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
