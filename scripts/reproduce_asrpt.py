"""Reproduce the A-SRPT paper's simulation study (A-SRPT §V-B, Figs. 6-9, Table II) in one command.

Cluster: ``cluster_configs/asrpt_sim_250x8.yaml`` (250 x 8 GPUs, 10 Gbps NIC,
300 GB/s NVLink). Jobs: a real trace (default AAIC, all five files, 459,545
jobs; ``--workload google``: the Google 2011 trace, GPU counts drawn per logical job
name) built as the paper builds its workload (docs/asrpt_workloads.md). Each
point of each sweep samples a run of consecutive jobs (seeded random start);
the ``--history`` (alias ``--history-jobs``, as a trial's ``workload.history_jobs``)
jobs just before it train the predictors before the run
(the paper trains on the earlier 80% of its trace) and every policy refits
online every ``--retrain-every`` completions.

Load: arrivals are compressed so that the trace's average busy GPUs (sum of
GPUs x run time over its span; AAIC ~126 GPUs on a 256-320 GPU cluster) offer
``--load`` times the simulated cluster's GPUs (``--arrival-scale`` sets the
compression directly). Scaled-down runs (``--scale`` < 1) also scale the
cluster (``--cluster-scale``, default = ``--scale``: 250 x s servers), so jobs
per GPU stay as in the paper; jobs larger than the scaled cluster are dropped.

Sweeps (``--sweeps``):

* ``jobs``      total JCT vs number of jobs (Fig. 6; paper 37.5k..150k)
* ``single``    vs share of single-GPU jobs, 80% -> 0% (Fig. 7; 75k jobs)
* ``nic``       vs NIC bandwidth 1..50 Gbps, 0% single-GPU jobs (Fig. 8); the
  jobs (and their iteration counts) are built once on the 10 Gbps cluster
* ``predictor`` A-SRPT with the RF / median / mean / perfect predictors, the
  baselines with RF (Fig. 9), plus the predictors' mean absolute error on the
  job set after fitting on the history (``predictor_errors.csv``); for every job set of
  every sweep, ``predictor_holdout.csv``: each predictor fitted on the first 80% of
  history + set (submit order) and scored on the later 20%
* ``load``      vs offered load (our addition: the paper gives no load axis)
* ``table2``    Heavy-Edge vs the optimal ILP (scripts/bench_placement.py)

Policies: asrpt, asrpt-perfect, spjf, spwf, wcs-duration, wcs-workload,
wcs-subtime — whichever are registered (the missing ones are printed). Output
folder: ``runs.csv`` (every simulation), ``<sweep>.csv`` + ``<sweep>.png``,
``predictor_errors.csv``, ``table2.csv`` and ``summary.md`` with the paper's
numbers beside ours. Sizes scale with ``--scale`` (1.0 = the paper's job
counts); ``--quick`` is a small run for tests. Run:

    .venv/bin/python scripts/reproduce_asrpt.py --out results/asrpt_repro [--scale 0.05] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import math
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from raytestbed.config import CLUSTER_CONFIG_DIR, load_cluster  # noqa: E402
from raytestbed.core.job import Job  # noqa: E402
from raytestbed.core.profile import default_profiles  # noqa: E402
from raytestbed.core.timing import make_iteration_model  # noqa: E402
from raytestbed.errors import RaytestbedError  # noqa: E402
from raytestbed.schedulers.base import available_policies, make_policy  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.aaic import DEFAULT_FILES, FOLDER as AAIC_FOLDER, read_aaic  # noqa: E402
from raytestbed.traces.asrpt_workload import AsrptTraceParams, build_asrpt_jobs  # noqa: E402
from raytestbed.traces.asrpt_workload import trace_busy_gpus  # noqa: E402,F401  (= workload offered_load's B)
from raytestbed.traces.datadir import data_file  # noqa: E402
from raytestbed.traces.dirlab import FOLDER as DIRLAB_FOLDER, read_dirlab  # noqa: E402
from raytestbed.traces.philly import FILE as PHILLY_FILE, read_philly  # noqa: E402
from raytestbed.traces.registry import WorkloadContext  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_placement  # noqa: E402

POLICIES = ["asrpt", "asrpt-perfect", "spjf", "spwf", "wcs-duration", "wcs-workload", "wcs-subtime"]
BASELINES = ["spjf", "spwf", "wcs-duration", "wcs-workload", "wcs-subtime"]
AAIC_ALL = ["aaicwl-2017Q3.csv.gz", "aaicwl-2017Q4.csv.gz", "aaicwl-2018Q1.csv.gz", "aaicwl-2018Q2.csv.gz",
            "aaicwl-201807-201812.csv.gz"]

PAPER = {
    "jobs": "Fig. 6 (37.5k -> 150k jobs): A-SRPT lowers total JCT by 31%-91% vs the baselines; SPJF is the worst.",
    "single": "Fig. 7 (75k jobs, single-GPU share 80% -> 0%): the reduction grows from 16% to 57%.",
    "nic": "Fig. 8 (1 -> 50 Gbps, 0% single-GPU jobs): at 50 Gbps 12% better than the best baseline "
           "(WCS-Duration); at 1 Gbps up to 92% reduction.",
    "predictor": "Fig. 9: mean absolute error RF 369 < median 563 < mean 593 iterations; A-SRPT with RF is only "
                 "14% worse than A-SRPT-Perfect; less accurate predictors (mean) degrade it markedly.",
    "load": "(no paper counterpart: our load axis, 0.5 -> 1.5).",
    "table2": "Table II: VGG19 Heavy-Edge 88.11 ms vs ILP 82.96 ms (+6%), PCT 1.94 ms vs 55,318.86 ms; "
              "GPT-175B 10.14 vs 10.14 ms (+0%), PCT 1.52 ms vs 2,288.12 ms.",
}


# --------------------------------------------------------------------------- trace and job sets

def read_trace(trace: str, seed: int = 1, max_gpus: int | None = None) -> list:
    """All rows of a trace, in arrival order (``aaic`` = all five AAIC files).

    ``google``: the Google 2011 file (kind ``google``); every logical name draws its GPU count
    from the AAIC job mix with ``seed``, among counts <= ``max_gpus`` (the simulated cluster's GPUs).
    """
    if trace == "google":  # --workload google (the Google 2011 trace)
        from raytestbed.traces.google import google_trace_rows
        return google_trace_rows(seed, max_gpus if max_gpus is not None else 2000, starts=[REPO])
    if trace == "aaic":
        rows = []
        for i, name in enumerate(AAIC_ALL):
            rows.extend(read_aaic(data_file(f"{AAIC_FOLDER}/{name}", [REPO]), f"f{i}:"))
        rows.sort(key=lambda r: r.arrival_s)
        return rows
    if trace == "aaic-2018h2":
        return sorted(read_aaic(data_file(f"{AAIC_FOLDER}/{DEFAULT_FILES[0]}", [REPO]), ""),
                      key=lambda r: r.arrival_s)
    if trace == "philly":
        return sorted(read_philly(data_file(PHILLY_FILE, [REPO])), key=lambda r: r.arrival_s)
    if trace in ("helios", "philly15k"):
        name = "helios" if trace == "helios" else "philly"
        return read_dirlab(data_file(f"{DIRLAB_FOLDER}/{name}_data_training.csv", [REPO]))
    raise SystemExit(f"--trace {trace!r}: expected aaic, aaic-2018h2, philly, helios, philly15k or google")


@dataclasses.dataclass
class JobSet:
    jobs: list[Job]
    history: list[tuple[str, str, int]]  #: (group, user, iterations) of the jobs before the set
    start: int
    offered_load: float  #: sum g_i n_i alpha~min_i / (G x arrival span)
    history_jobs: list[Job] = dataclasses.field(default_factory=list)  #: the history rows as built jobs


def make_jobset(rows: list, n: int, history: int, seed: int, cluster, arrival_scale: float,
                single_share: float | None) -> JobSet:
    """``n`` consecutive jobs at a seeded random start, preceded by ``history`` jobs for the predictors."""
    rng = np.random.default_rng(seed)
    total = n + history
    if total > len(rows):
        raise SystemExit(f"{n} jobs + {history} history jobs asked, the trace has {len(rows)} rows")
    start = int(rng.integers(0, len(rows) - total + 1))
    p = AsrptTraceParams(jobs=total, start=start, arrival_scale=arrival_scale, single_gpu_share=single_share,
                         oversize="drop")
    ctx = WorkloadContext(cluster, seed, REPO, default_profiles(), where="reproduce_asrpt")
    built = build_asrpt_jobs(rows, p, ctx)
    hist, body = built[:history], built[history:]
    t0 = body[0].arrival_s
    jobs = [dataclasses.replace(j, job_id=i, arrival_s=j.arrival_s - t0, extra=dict(j.extra))
            for i, j in enumerate(body)]
    G = cluster.total_gpus
    from raytestbed.core.timing import asrpt_alpha_min_tilde
    from raytestbed.traces.asrpt_workload import alpha_min_mapper
    mapper = alpha_min_mapper(seed)
    cache: dict = {}
    work = 0.0
    for j in jobs:
        key = (j.model, j.replicas(), tuple(st.profile for st in j.stages))
        if key not in cache:
            cache[key] = asrpt_alpha_min_tilde(j, cluster.gpus_per_server, cluster.nic_bps, cluster.intra_bps, mapper)
        work += j.gpus * j.iterations * cache[key]
    span = max(jobs[-1].arrival_s, 1.0)
    return JobSet(jobs, [(j.group, j.user, j.iterations) for j in hist], start, work / (G * span), list(hist))


# --------------------------------------------------------------------------- simulation

def policy_params(name: str, predictor: str | None, history, retrain_every: int) -> dict:
    cls = available_policies()[name]
    sig = inspect.signature(cls.__init__).parameters
    params = {}
    if "history" in sig:
        params["history"] = history
    if "retrain_every" in sig:
        params["retrain_every"] = retrain_every
    if predictor is not None and "predictor" in sig:
        params["predictor"] = predictor
    return params


def simulate(cluster, jobs: list[Job], name: str, seed: int, params: dict) -> dict:
    policy = make_policy(name, "placement", seed, **params)
    t0 = time.perf_counter()
    sim = Simulator(cluster, [copy.copy(j) for j in jobs], policy, model=make_iteration_model("asrpt"))
    res = sim.run()
    wall = time.perf_counter() - t0
    fin = [r for r in res.records if not math.isnan(r.finish_s)]
    jct = np.array([r.finish_s - r.job.arrival_s for r in fin])
    queue = np.array([r.first_start_s - r.job.arrival_s for r in fin])
    dt = res.decision_times_s
    return dict(jobs=len(jobs), finished=len(fin), total_jct_s=float(jct.sum()),
                avg_jct_s=float(jct.mean()) if jct.size else math.nan,
                avg_queue_s=float(queue.mean()) if queue.size else math.nan,
                makespan_s=float(max(r.finish_s for r in fin)) if fin else math.nan, wall_s=wall,
                decision_p50_s=float(np.percentile(dt, 50)) if dt.size else math.nan,
                decision_p99_s=float(np.percentile(dt, 99)) if dt.size else math.nan)


# --------------------------------------------------------------------------- sweeps

@dataclasses.dataclass
class Config:
    scale: float
    history: int
    seed: int
    load: float  #: target offered load: arrival_scale = trace busy GPUs / (G x load)
    arrival_scale: float | None  #: explicit arrival compression (overrides ``load``)
    retrain_every: int | None
    jobs_points: list[float]
    single_points: list[float]
    nic_points: list[float]
    load_points: list[float]
    single_jobs: float
    table2_cases: int
    table2_random: int


def full_config(scale: float, history: int, seed: int, load: float, arrival_scale: float | None,
                retrain_every: int | None) -> Config:
    return Config(scale, history, seed, load, arrival_scale, retrain_every,
                  jobs_points=[37_500, 75_000, 112_500, 150_000], single_points=[0.8, 0.6, 0.4, 0.2, 0.0],
                  nic_points=[1, 10, 25, 50], load_points=[0.5, 0.75, 1.0, 1.5], single_jobs=75_000,
                  table2_cases=20, table2_random=200)


def quick_config(seed: int) -> Config:
    return Config(1.0, 300, seed, 1.0, None, None, jobs_points=[150, 300], single_points=[0.8, 0.0],
                  nic_points=[1, 50], load_points=[0.5, 1.5], single_jobs=200, table2_cases=2, table2_random=0)


def run_sweeps(sweeps: list[str], cfg: Config, policies: list[str], rows: list, base_cluster_cfg, out: Path,
               log=print) -> pd.DataFrame:
    records: list[dict] = []
    holdout: list[dict] = []
    holdout_done: set = set()
    base = base_cluster_cfg.build()
    busy = trace_busy_gpus(rows)

    def arrival_scale(load: float | None = None) -> float:
        if cfg.arrival_scale is not None and load is None:
            return cfg.arrival_scale
        return busy / (base.total_gpus * (load if load is not None else cfg.load))

    log(f"cluster {base.num_servers} x {base.gpus_per_server} GPUs; trace keeps {busy:.1f} GPUs busy on average; "
        f"arrival scale {arrival_scale():.4g}")

    def n_of(x: float) -> int:
        return max(10, int(round(x * cfg.scale)))

    def retrain(n: int) -> int:
        return cfg.retrain_every or max(50, n // 10)

    def run_point(sweep: str, x, js: JobSet, cluster, runs: list[tuple[str, str, str | None]]) -> None:
        for label, name, pred in runs:
            r = simulate(cluster, js.jobs, name, cfg.seed, policy_params(name, pred, js.history, retrain(len(js.jobs))))
            r.update(sweep=sweep, x=x, policy=label, start=js.start, offered_load=js.offered_load,
                     history_jobs=len(js.history), nic_gbps=cluster.nic_bps * 8 / 1e9, gpus=cluster.total_gpus)
            records.append(r)
            if (sweep, x) not in holdout_done:  # predictors on the held-out later 20% of history + set
                holdout_done.add((sweep, x))
                from raytestbed.predict.evaluate import holdout_errors
                holdout.extend(dict(sweep=sweep, x=x, start=js.start, **e)
                               for e in holdout_errors([*js.history_jobs, *js.jobs], cfg.seed))
                pd.DataFrame(holdout).to_csv(out / "predictor_holdout.csv", index=False)
            log(f"  {sweep:<9} x={x:<8} {label:<16} total JCT {r['total_jct_s']:.4e} s  mean queue "
                f"{r['avg_queue_s']:.3g} s ({r['finished']}/{r['jobs']} finished, load {js.offered_load:.2f}, "
                f"{r['wall_s']:.1f} s)", flush=True)

    plain = [(p, p, None) for p in policies]
    for sweep in sweeps:
        t0 = time.perf_counter()
        if sweep == "jobs":
            for x in cfg.jobs_points:
                n = n_of(x)
                run_point(sweep, n, make_jobset(rows, n, cfg.history, cfg.seed, base, arrival_scale(), None),
                          base, plain)
        elif sweep == "single":
            n = n_of(cfg.single_jobs)
            for x in cfg.single_points:
                run_point(sweep, x, make_jobset(rows, n, cfg.history, cfg.seed, base, arrival_scale(), x),
                          base, plain)
        elif sweep == "nic":
            n = n_of(cfg.single_jobs)
            js = make_jobset(rows, n, cfg.history, cfg.seed, base, arrival_scale(), 0.0)
            for x in cfg.nic_points:
                cl = base_cluster_cfg.model_copy(update={"nic_gbps": float(x)}).build()
                run_point(sweep, x, js, cl, plain)
        elif sweep == "predictor":
            n = n_of(cfg.single_jobs)
            js = make_jobset(rows, n, cfg.history, cfg.seed, base, arrival_scale(), None)
            runs = list(plain)
            if "asrpt" in policies:
                runs += [("asrpt[median]", "asrpt", "median"), ("asrpt[mean]", "asrpt", "mean")]
            run_point(sweep, "trace", js, base, runs)
            predictor_errors(js, cfg.seed).to_csv(out / "predictor_errors.csv", index=False)
        elif sweep == "load":
            n = n_of(cfg.single_jobs)
            for x in cfg.load_points:
                run_point(sweep, x, make_jobset(rows, n, cfg.history, cfg.seed, base, arrival_scale(x), None),
                          base, plain)
        elif sweep == "table2":
            name, t2 = bench_placement.table2(["vgg19-cifar", "vgg16", "gpt-small"], cfg.table2_cases, 16,
                                              cfg.seed, CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
            df = pd.DataFrame(t2)
            df.insert(0, "comparator", name)
            df.to_csv(out / "table2.csv", index=False)
            log(bench_placement.format_table2(name, t2))
            if cfg.table2_random:
                s = bench_placement.random_sweep(["vgg16", "resnet101", "inception_v3", "gnmt", "gnmt_large",
                                                  "gpt-small", "vgg19-cifar"], cfg.table2_random, cfg.seed + 1,
                                                 CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
                pd.DataFrame([s]).to_csv(out / "table2_random.csv", index=False)
        else:
            raise SystemExit(f"--sweeps: unknown sweep {sweep!r}")
        log(f"[{sweep}] done in {time.perf_counter() - t0:.0f} s")
        save(records, out)  # after every sweep, so an interrupted run keeps what it finished
    return pd.DataFrame(records)


def save(records: list[dict], out: Path) -> None:
    """``runs.csv`` and one CSV + PNG per sweep."""
    df = pd.DataFrame(records)
    if df.empty:
        return
    df.to_csv(out / "runs.csv", index=False)
    for sweep, part in df.groupby("sweep", sort=False):
        part.to_csv(out / f"{sweep}.csv", index=False)
        plot_sweep(sweep, part, out / f"{sweep}.png")


def predictor_errors(js: JobSet, seed: int) -> pd.DataFrame:
    """MAE |n - ñ| of each predictor on the job set after fitting on the history (paper §V-B-2-d)."""
    from raytestbed.predict.evaluate import prediction_errors

    return pd.DataFrame(prediction_errors(js.history_jobs, js.jobs, seed))


def plot_sweep(sweep: str, df: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if sweep == "predictor":
        d = df.sort_values("total_jct_s")
        ax.bar(d["policy"], d["total_jct_s"])
        ax.tick_params(axis="x", rotation=45)
    else:
        for pol, part in df.groupby("policy", sort=False):
            part = part.sort_values("x")
            ax.plot(part["x"], part["total_jct_s"], marker="o", label=pol)
        ax.set_xlabel({"jobs": "number of jobs", "single": "share of single-GPU jobs", "nic": "NIC bandwidth (Gbps)",
                       "load": "target offered load"}.get(sweep, sweep))
        ax.legend(fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("total JCT (s)")
    ax.set_title(f"A-SRPT reproduction: {sweep}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- summary

def reductions(part: pd.DataFrame) -> pd.DataFrame:
    """Per point: A-SRPT's total-JCT reduction vs the best and the worst baseline, and its gap to Perfect."""
    out = []
    for x, pt in part.groupby("x", sort=False):
        t = dict(zip(pt["policy"], pt["total_jct_s"]))
        if "asrpt" not in t:
            continue
        base = {b: t[b] for b in BASELINES if b in t}
        row = {"x": f"{x:g}" if isinstance(x, (int, float, np.number)) else x}
        if base:
            best = min(base, key=base.get)
            worst = max(base, key=base.get)
            row.update(best_baseline=best, vs_best_pct=(1 - t["asrpt"] / base[best]) * 100,
                       worst_baseline=worst, vs_worst_pct=(1 - t["asrpt"] / base[worst]) * 100)
        if "asrpt-perfect" in t:
            row["above_perfect_pct"] = (t["asrpt"] / t["asrpt-perfect"] - 1) * 100
        out.append(row)
    return pd.DataFrame(out)


def md_table(df: pd.DataFrame, fmt: str = ".4g", index: bool = False) -> str:
    """A Markdown table (no extra dependency)."""
    d = df.reset_index() if index else df

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return format(float(v), fmt) if math.isfinite(v) else ""
        return str(v)

    cols = [str(c) for c in d.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in d.itertuples(index=False):
        first = f"{row[0]:g}" if index and isinstance(row[0], (float, int, np.number)) else cell(row[0])
        out.append("| " + " | ".join([first, *(cell(v) for v in row[1:])]) + " |")
    return "\n".join(out)


def write_summary(out: Path, df: pd.DataFrame, sweeps: list[str], missing: list[str], args_line: str,
                  trace: str, cluster: str = "asrpt_sim_250x8") -> None:
    lines = ["# A-SRPT simulation study: reproduction", "",
             f"Command: `{args_line}`", "",
             f"Trace: {trace}; cluster {cluster} (8 GPUs per server, 10 Gbps, 300 GB/s) unless the sweep varies it.",
             "Total JCT = sum over jobs of (finish - arrival), seconds (the paper's total job flow time).", ""]
    if missing:
        lines += [f"Policies not registered (skipped): {', '.join(missing)}", ""]
    for sweep in sweeps:
        lines += [f"## {sweep}", "", f"Paper: {PAPER[sweep]}", ""]
        if sweep == "table2":
            t2 = out / "table2.csv"
            if t2.exists():
                lines += [md_table(pd.read_csv(t2), ".4g"), ""]
            tr = out / "table2_random.csv"
            if tr.exists():
                lines += ["Random jobs (PITT ratio mapper / ILP):", "",
                          md_table(pd.read_csv(tr), ".4g"), ""]
            continue
        part = df[df["sweep"] == sweep] if not df.empty else df
        if part.empty:
            lines += ["(not run: no registered policy)", ""]
            continue
        piv = part.pivot_table(index="x", columns="policy", values="total_jct_s", sort=False)
        lines += ["Total JCT (s):", "", md_table(piv, ".4g", index=True), ""]
        red = reductions(part)
        if not red.empty:
            lines += ["A-SRPT vs baselines (positive = A-SRPT lower):", "",
                      md_table(red, ".1f"), ""]
        loads = part.groupby("x", sort=False)["offered_load"].first()
        lines += ["Offered load (sum g n alpha~min / (G x arrival span)): "
                  + ", ".join(f"{x}: {v:.2f}" for x, v in loads.items()), ""]
        q = part.pivot_table(index="x", columns="policy", values="avg_queue_s", sort=False)
        lines += ["Mean queueing delay (s):", "", md_table(q, ".3g", index=True), ""]
        if sweep == "predictor" and (out / "predictor_errors.csv").exists():
            lines += ["Predictor mean absolute error on the job set (fitted on the history):", "",
                      md_table(pd.read_csv(out / "predictor_errors.csv"), ".4g"), ""]
        if (out / "predictor_holdout.csv").exists():
            ho = pd.read_csv(out / "predictor_holdout.csv")
            ho = ho[ho["sweep"] == sweep]
            if not ho.empty:
                lines += ["Predictor MAE (iterations) on the later 20% of history + set, fitted on the first 80%:",
                          "", md_table(ho.pivot_table(index="x", columns="predictor", values="mae_iterations",
                                                      sort=False), ".4g", index=True), ""]
        lines += [f"![{sweep}]({sweep}.png)", ""]
    (out / "summary.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds to a minute)")
    ap.add_argument("--sweeps", default="jobs,single,nic,predictor,load,table2")
    ap.add_argument("--trace", "--workload", dest="trace", default="aaic",
                    help="aaic (all files) | aaic-2018h2 | philly | helios | philly15k | google (the Google 2011 trace)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the paper's job counts")
    ap.add_argument("--history", "--history-jobs", dest="history", type=int, default=None,
                    help="trace jobs just before each set that train every policy's predictor (a trial's "
                         "workload.history_jobs; the paper trains on the earlier 80%% of its trace); "
                         "default max(1000, 20,000 x --scale), --quick 300")
    ap.add_argument("--load", type=float, default=1.0,
                    help="target offered load: arrivals are compressed by (trace busy GPUs) / (G x load)")
    ap.add_argument("--arrival-scale", type=float, default=None, help="explicit arrival compression (overrides --load)")
    ap.add_argument("--cluster-scale", type=float, default=None,
                    help="servers = 250 x this (default: --scale, keeping jobs per GPU as in the paper)")
    ap.add_argument("--retrain-every", type=int, default=None, help="default: max(50, jobs / 10)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--summary-only", action="store_true",
                    help="rewrite summary.md from the runs.csv already in --out (e.g. after an interrupted run)")
    args = ap.parse_args(argv)
    sweeps = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    if args.summary_only:
        runs = args.out / "runs.csv"
        if not runs.is_file():
            raise SystemExit(f"{runs}: not found")
        df = pd.read_csv(runs)
        done = [s for s in sweeps if s in set(df["sweep"]) or (s == "table2" and (args.out / "table2.csv").exists())]
        argv_line = "scripts/reproduce_asrpt.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_summary(args.out, df, done, [], argv_line, args.trace, "see runs.csv")
        print(f"wrote {args.out}/summary.md from {runs}")
        return
    if args.quick:
        cfg = quick_config(args.seed)
        cfg.arrival_scale = args.arrival_scale
        cfg.load = args.load
        cfg.retrain_every = args.retrain_every
        if args.history is not None:
            cfg.history = args.history
    else:
        cfg = full_config(args.scale, args.history if args.history is not None else max(1000, int(20_000 * args.scale)),
                          args.seed, args.load, args.arrival_scale, args.retrain_every)
    registered = available_policies()
    wanted = [p.strip() for p in args.policies.split(",") if p.strip()]
    policies = [p for p in wanted if p in registered]
    missing = [p for p in wanted if p not in registered]
    if missing:
        print(f"not registered (skipped): {', '.join(missing)}")
    print(f"policies: {', '.join(policies) or '(none)'}")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cluster_cfg = load_cluster(CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
    cscale = args.cluster_scale if args.cluster_scale is not None else (1.0 if args.quick else args.scale)
    if cscale != 1.0:
        group = cluster_cfg.servers[0].model_copy(update={"count": max(1, round(250 * cscale))})
        cluster_cfg = cluster_cfg.model_copy(update={"servers": [group],
                                                     "name": f"asrpt_sim_{group.count}x{group.gpus}"})
    needs_trace = any(s != "table2" for s in sweeps)
    rows = read_trace(args.trace, args.seed, cluster_cfg.build().total_gpus) if needs_trace and policies else []
    if rows:
        print(f"trace {args.trace}: {len(rows)} rows read in {time.perf_counter() - t0:.1f} s")
    run = [s for s in sweeps if s == "table2" or rows]
    if len(run) < len(sweeps):
        print(f"no registered policy to simulate: skipped {', '.join(s for s in sweeps if s not in run)}")
    df = run_sweeps(run, cfg, policies, rows, cluster_cfg, args.out)
    argv_line = "scripts/reproduce_asrpt.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_summary(args.out, df, sweeps, missing, argv_line, args.trace, cluster_cfg.name)
    print(f"wrote {args.out}/summary.md ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    try:
        main()
    except RaytestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
