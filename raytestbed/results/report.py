"""A Markdown report per results folder, with matplotlib PNGs.

For a ``run`` folder: summary table, JCT CDF, GPU utilisation over time, per-job
Gantt chart of GPU holding intervals, decision-latency histogram, and (emulated runs
with real compute) each job's training loss per iteration. For a ``compare``
folder: the comparison table and bars, JCT CDFs of all policies on one plot, and
each policy's own report in its sub-folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from raytestbed.results.queueing import free_gpu_steps
from raytestbed.results.ranking import rank_labels, summary_line
from raytestbed.results.tables import md_table  # noqa: E402
from raytestbed.results.writer import policy_folder  # noqa: E402

SUMMARY_ROWS = ["policy", "network_policy", "backend", "timing", "jobs", "finished", "unfinished", "total_jct_s", "avg_jct_s",
                "median_jct_s", "makespan_s", "gpu_utilisation", "total_queue_s", "queue_gpus_free_s", "total_utility",
                "avg_cct_s", "p95_cct_s", "ratio_to_lb", "decision_time_p50_s", "decision_time_p99_s", "wall_s", "seed"]


def _jct_cdf(ax, jobs: pd.DataFrame, label: str) -> None:
    jct = np.sort(jobs.loc[jobs["status"] == "finished", "jct_s"].astype(float).to_numpy())
    if jct.size:
        ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=label)


def utilisation_series(intervals: pd.DataFrame, total_gpus: int, points: int = 400):
    """Busy-GPU fraction over time from (start_s, end_s, gpus) intervals."""
    if intervals.empty:
        return np.array([0.0]), np.array([0.0])
    ts = np.linspace(0.0, float(intervals["end_s"].max()), points)
    t, free = free_gpu_steps(intervals, total_gpus)  # an interval [start, end) holds its GPUs
    i = np.searchsorted(t, ts, side="right") - 1
    busy = np.where(i >= 0, total_gpus - free[np.maximum(i, 0)], 0.0)
    return ts, busy / max(total_gpus, 1)


def _varys_bins(jobs: pd.DataFrame) -> pd.DataFrame | None:
    """Per Varys bin: coflows, mean/p95 CCT (s), mean slowdown; None unless every job is one coflow."""
    if "varys_bin" not in jobs or jobs["varys_bin"].isna().any() or jobs.empty:
        return None
    done = jobs[jobs["status"] == "finished"].copy()
    done["slowdown"] = done["jct_s"] / done["lower_bound_s"]
    rows = []
    for b in ("SN", "LN", "SW", "LW"):
        g = done[done["varys_bin"] == b]
        if len(g):
            rows.append({"bin": b, "coflows": len(g), "mean_cct_s": g["jct_s"].mean(),
                         "p95_cct_s": g["jct_s"].quantile(0.95), "mean_slowdown": g["slowdown"].mean()})
    rows.append({"bin": "all", "coflows": len(done), "mean_cct_s": done["jct_s"].mean(),
                 "p95_cct_s": done["jct_s"].quantile(0.95), "mean_slowdown": done["slowdown"].mean()})
    return pd.DataFrame(rows)


def _type_utilisation(summary: dict) -> str:
    """The report's per-GPU-type utilisation table (clusters of several types), or "" when the run has none.

    Per type: the GPU-seconds jobs held GPUs of that type over (its GPUs x the makespan), from
    ``summary.json``'s ``gpu_utilisation_by_type``."""
    by_type = summary.get("gpu_utilisation_by_type")
    if not by_type:
        return ""
    table = pd.DataFrame([{"gpu_type": t, "utilisation": u} for t, u in sorted(by_type.items())])
    return f"""
Per GPU type (GPU-seconds held on the type's GPUs over its GPUs x the makespan):

{md_table(table)}
"""


def run_report(folder: Path, total_gpus: int | None = None, max_gantt_jobs: int = 200) -> Path:
    """Write ``report.md`` and PNGs into a ``run`` results folder; returns the report path."""
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    jobs = pd.read_csv(folder / "jobs.csv")
    iv_path = folder / "gpu_intervals.csv"
    intervals = pd.read_csv(iv_path) if iv_path.exists() else pd.DataFrame(columns=["job_id", "start_s", "end_s", "gpus"])
    if total_gpus is None:
        total_gpus = int(summary.get("total_gpus") or max(1, jobs["gpus"].max()))
    name = summary.get("policy", "") + (f"+{summary['network_policy']}" if summary.get("network_policy") else "")

    fig, ax = plt.subplots(figsize=(5, 3.5))
    _jct_cdf(ax, jobs, name)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (s)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "jct_cdf.png", dpi=100)
    plt.close(fig)

    ts, util = utilisation_series(intervals, total_gpus)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(ts, util)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("busy GPUs / all GPUs")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "gpu_utilisation.png", dpi=100)
    plt.close(fig)

    shown = sorted(intervals["job_id"].unique())[:max_gantt_jobs] if not intervals.empty else []
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.12 * len(shown) + 1)))
    for row, jid in enumerate(shown):
        for s, e, g in intervals.loc[intervals["job_id"] == jid, ["start_s", "end_s", "gpus"]].itertuples(index=False):
            ax.barh(row, e - s, left=s, height=0.8, color=plt.cm.viridis(min(1.0, np.log2(g + 1) / 6)))
        arr = float(jobs.loc[jobs["job_id"] == jid, "arrival_s"].iloc[0])
        ax.plot([arr], [row], "k|", ms=4)
    ax.set_xlabel("time (s)  (| = arrival, colour = GPUs)")
    ax.set_ylabel("job (by id)")
    ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(folder / "gantt.png", dpi=100)
    plt.close(fig)

    walls = []
    dpath = folder / "decisions.jsonl"
    if dpath.exists():
        with open(dpath, encoding="utf-8") as f:
            walls = [json.loads(line)["wall_s"] for line in f]
    fig, ax = plt.subplots(figsize=(5, 3))
    if walls:
        w = np.asarray(walls) * 1e3
        ax.hist(w, bins=np.logspace(np.log10(max(w.min(), 1e-4)), np.log10(max(w.max(), 1e-3)), 40))
        ax.set_xscale("log")
    ax.set_xlabel("decision wall time (ms), calls that decided something")
    ax.set_ylabel("calls")
    fig.tight_layout()
    fig.savefig(folder / "decision_latency.png", dpi=100)
    plt.close(fig)

    loss_section = _loss_plot(folder)
    table = pd.DataFrame([{k: summary.get(k) for k in SUMMARY_ROWS if k in summary}])
    bins = _varys_bins(jobs)
    typed_section = _type_utilisation(summary)
    note = f"\n**{summary['note']}** (docs/trials.md, \"Resume\").\n" if summary.get("note") else ""
    text = f"""# Report: {summary.get('trial', '')} — {name}
{note}
{md_table(table)}

Files: `jobs.csv` (per job), `events.jsonl`, `decisions.jsonl`, `gpu_intervals.csv`, `config.yaml`.
Times in seconds. Decision-time percentiles cover every policy call; the histogram shows calls that
returned decisions.

## JCT distribution
![JCT CDF](jct_cdf.png)

## GPU utilisation over time
![GPU utilisation](gpu_utilisation.png)
{typed_section}
## Placements over time (first {len(shown)} jobs)
![Gantt](gantt.png)

## Decision latency
![Decision latency](decision_latency.png)
{loss_section}"""
    if bins is not None:
        text += f"""
## Coflows by Varys bin
Every job is one coflow: its JCT is the coflow completion time (CCT; the JCT CDF above is the CCT
CDF). Bins: S(hort) = largest flow < 5 MiB, else L(ong); N(arrow) = at most 50 flows, else W(ide).
Slowdown = CCT / the coflow's stand-alone optimum (`lower_bound_s`, the Parrot paper's eq. 26).

{md_table(bins)}
"""
    out = folder / "report.md"
    out.write_text(text, encoding="utf-8")
    return out


FELL_CLEARLY = 0.3  #: "loss fell": the last trained loss at least this fraction below the first


def loss_table(it: pd.DataFrame) -> pd.DataFrame:
    """Per job: first and last trained iteration and loss, the change, iterations trained and skipped.

    ``it`` holds ``iterations.csv`` rows of a real-compute run. ``fell`` is True when the last loss is
    at least :data:`FELL_CLEARLY` below the first (a loss that wanders a few per cent does not count).
    A job that trained without a finite loss (e.g. NaN) keeps its row, with no losses and ``fell``
    False, so it counts against "loss fell" instead of vanishing from the table.
    """
    rows = []
    for jid, sub in it.sort_values("iteration").groupby("job_id", sort=True):
        x = sub["iteration"].to_numpy(int)
        losses = sub["loss"].to_numpy(float)
        ok = np.isfinite(losses)
        first, last = (float(losses[ok][0]), float(losses[ok][-1])) if ok.any() else (math.nan, math.nan)
        change = last / first - 1.0 if first > 0 else math.nan
        rows.append({"job": int(jid), "first_iteration": int(x[0]), "first_loss": first,
                     "last_iteration": int(x[-1]), "last_loss": last, "change": change,
                     "trained": len(x), "fast_forwarded": int(x[-1] - x[0] + 1 - len(x)),
                     "fell": bool(last <= (1.0 - FELL_CLEARLY) * first)})
    return pd.DataFrame(rows)


def _job_style(k: int) -> dict:
    """A distinct (colour, line style) per job: tab20's 20 colours, then the next line style."""
    styles = ("-", "--", "-.", ":")
    return {"color": plt.get_cmap("tab20")(k % 20), "linestyle": styles[(k // 20) % len(styles)]}


def _loss_plot(folder: Path, max_jobs: int = 80) -> str:
    """``loss.png`` (training loss per iteration, one line per job) from ``iterations.csv``; returns the
    report section with a per-job table of first and last loss, or "" when no iteration carries a loss
    (replay, or the simulator). Iterations skipped by fast-forward (not trained) are drawn as a thin
    dotted line of the job's colour between the iterations around them."""
    from matplotlib.lines import Line2D

    path = folder / "iterations.csv"
    if not path.exists():
        return ""
    it = pd.read_csv(path)
    if "loss" not in it.columns or not it["loss"].notna().any():
        return ""
    jobs = sorted(it["job_id"].unique())  # every job that trained, with a loss or not (loss_table)
    shown = jobs[:max_jobs]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    handles = []
    any_gap = False
    for k, jid in enumerate(shown):
        sub = it[(it["job_id"] == jid) & np.isfinite(it["loss"])].sort_values("iteration")
        x, y = sub["iteration"].to_numpy(float), sub["loss"].to_numpy(float)
        st = _job_style(k)
        gap = np.flatnonzero(np.diff(x) > 1) + 1  # fast-forwarded iterations: no trained line across them
        (line,) = ax.plot(np.insert(x, gap, np.nan), np.insert(y, gap, np.nan), lw=1.2, marker=".", ms=3,
                          label=f"job {jid}", **st)
        handles.append(line)
        for g in gap:
            any_gap = True
            ax.plot(x[g - 1:g + 1], y[g - 1:g + 1], color=st["color"], lw=0.8, linestyle=(0, (1, 2)), alpha=0.8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if any_gap:
        handles.append(Line2D([], [], color="grey", lw=0.8, linestyle=(0, (1, 2)),
                              label="fast-forwarded (not trained)"))
    ax.legend(handles=handles, fontsize=7, ncol=max(1, -(-len(handles) // 24)), loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(folder / "loss.png", dpi=100)
    plt.close(fig)
    tab = loss_table(it)
    falling = int(tab["fell"].sum())
    shown_note = f" (plot: the first {len(shown)} jobs)" if len(shown) < len(jobs) else ""
    table = tab.assign(change=[f"{100 * c:+.1f} %" if math.isfinite(c) else "no loss" for c in tab["change"]],
                       fell=["yes" if f else "no" for f in tab["fell"]])
    return (f"\n## Training loss (real compute)\nLoss fell clearly (last trained loss at least "
            f"{FELL_CLEARLY:.0%} below the first) in {falling} of {len(jobs)} jobs. Iterations skipped by "
            f"fast-forward are not trained: dotted in the plot{shown_note}, counted as `fast_forwarded` "
            f"below.\n\n![Training loss](loss.png)\n\n{md_table(table)}\n")


def compare_report(folder: Path, total_gpus: int | None = None) -> Path:
    """Write ``report.md`` for a ``compare`` folder (and each policy's own report)."""
    folder = Path(folder)
    df = pd.read_csv(folder / "comparison.csv")
    fig, ax = plt.subplots(figsize=(6, 4))
    for pol in df["policy"].astype(str):
        sub = folder / policy_folder(pol)
        if (sub / "jobs.csv").exists():
            run_report(sub, total_gpus)
            _jct_cdf(ax, pd.read_csv(sub / "jobs.csv"), pol)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "jct_cdf.png", dpi=100)
    plt.close(fig)
    verdict = summary_line(df)
    df = df.assign(rank=rank_labels(df))
    links = "\n".join(f"- [{p}]({policy_folder(p)}/report.md)" for p in df["policy"].astype(str))
    cols = [c for c in ["policy", "rank", "jobs", "finished", "unfinished", "total_jct_s", "avg_jct_s", "makespan_s", "gpu_utilisation",
                        "total_utility", "avg_cct_s", "p95_cct_s", "ratio_to_lb", "decision_time_p50_s", "decision_time_p99_s", "wall_s",
                        "note"] if c in df.columns and not (c == "note" and df[c].isna().all())]
    text = f"""# Comparison

{md_table(df[cols])}

{verdict}.

![total JCT and makespan](comparison.png)

![JCT CDFs](jct_cdf.png)

Per-policy reports:
{links}
"""
    out = folder / "report.md"
    out.write_text(text, encoding="utf-8")
    return out
