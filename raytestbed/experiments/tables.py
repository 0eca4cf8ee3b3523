"""A sweep's tables and plots: ``sweep.csv``, ``aggregate.csv`` (mean, 95 % CI over seeds), PNGs, ``report.md``.

The 95 % confidence interval of a mean over n seeds is the Student-t half width
t_{0.975, n-1} * s / sqrt(n) (s: the sample standard deviation); empty for n = 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from raytestbed.experiments.cell import finished_summary  # noqa: E402
from raytestbed.experiments.spec import Cell, Sweep, safe_name  # noqa: E402
from raytestbed.results.records import SUMMARY_KEYS  # noqa: E402
from raytestbed.results.tables import md_table  # noqa: E402

#: columns that measure this machine's wall clock, not the schedule (differ between runs)
WALL_CLOCK = ("wall_s", "decision_time_p50_s", "decision_time_p99_s", "emulation")


def sweep_table(cells: list[Cell], out: Path) -> pd.DataFrame:
    """One row per finished cell: its identifying columns, then every summary column (nested values as JSON)."""
    rows = []
    for c in cells:
        s = finished_summary(out / "cells" / c.key, c)
        if s is None:
            continue
        row = c.describe()
        row["placement_policy"] = s.get("policy")
        for k, v in s.items():
            if k in ("policy", "seed"):
                continue
            row[k] = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        first = [c for c in rows[0] if c in ("trial", "policy", "seed", "cell") or c in dict(cells[0].point)]
        ordered = first + [k for k in SUMMARY_KEYS if k in df.columns and k not in first]
        df = df[ordered + [c for c in df.columns if c not in ordered]]
    return df


def deterministic_columns(df: pd.DataFrame) -> list[str]:
    """The columns of a ``sweep.csv`` that depend only on the schedule (not on wall-clock time)."""
    return [c for c in df.columns if c not in WALL_CLOCK and not c.endswith("wall_s")]


def ci95(values: np.ndarray) -> float:
    """Half width of the 95 % Student-t confidence interval of the mean (NaN for fewer than 2 values)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return math.nan
    return float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def mean_ci(df: pd.DataFrame, keys: list[str], metrics: list[str], mean_suffix: str = "",
            seeds: bool = False) -> pd.DataFrame:
    """Per group of ``keys`` (first-seen order): each metric's mean over the rows (the seeds) as
    ``METRIC + mean_suffix`` and the half width of its 95 % CI as ``METRIC_ci95`` (NaN for one row);
    ``seeds``: also the number of distinct seeds, after the keys. Non-numbers count as missing."""
    rows = []
    for key, g in df.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        if seeds:
            row["seeds"] = int(g["seed"].nunique())
        for m in metrics:
            v = pd.to_numeric(g[m], errors="coerce").to_numpy(dtype=float)
            row[f"{m}{mean_suffix}"] = float(np.nanmean(v)) if np.isfinite(v).any() else math.nan
            row[f"{m}_ci95"] = ci95(v)
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate(df: pd.DataFrame, axes: list[str], metrics: list[str]) -> pd.DataFrame:
    """Mean and 95 % CI over seeds of each metric, per trial x grid point x policy (sweep order kept)."""
    metrics = [m for m in metrics if m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any()]
    return mean_ci(df, ["trial", *axes, "policy"], metrics, mean_suffix="_mean", seeds=True)


def plot_metric(agg: pd.DataFrame, trial: str, axis: str, axes: list[str], metric: str, path: Path,
                title: str = "") -> bool:
    """``metric`` vs the grid ``axis``: a line per policy (and per value of the other axes), 95 % CI bands."""
    d = agg[agg["trial"] == trial]
    if f"{metric}_mean" not in d or d[f"{metric}_mean"].isna().all():
        return False
    others = [a for a in axes if a != axis]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    numeric = pd.to_numeric(d[axis], errors="coerce").notna().all()
    order = list(dict.fromkeys(d[axis]))
    for key, g in d.groupby(["policy", *others], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        label = key[0] + "".join(f", {a}={v}" for a, v in zip(others, key[1:]))
        x = pd.to_numeric(g[axis]) if numeric else g[axis].map(order.index)
        idx = np.argsort(x.to_numpy())
        xs, m = x.to_numpy()[idx], g[f"{metric}_mean"].to_numpy(dtype=float)[idx]
        ci = np.nan_to_num(g[f"{metric}_ci95"].to_numpy(dtype=float)[idx])
        line, = ax.plot(xs, m, marker="o", label=label)
        if ci.any():
            ax.fill_between(xs, m - ci, m + ci, color=line.get_color(), alpha=0.2, lw=0)
    if not numeric:
        ax.set_xticks(range(len(order)), [str(o) for o in order], rotation=30)
    means = d[f"{metric}_mean"].to_numpy(dtype=float)
    means = means[np.isfinite(means)]
    if means.size and means.min() > 0 and means.max() / means.min() > 100:
        ax.set_yscale("log")  # values over orders of magnitude; a band below zero is cut off
    ax.set_xlabel(axis)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{trial}: {metric} (mean, 95 % CI over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_bars(agg: pd.DataFrame, trial: str, metric: str, path: Path) -> bool:
    """No grid: ``metric`` per policy as bars with 95 % CI error bars."""
    d = agg[agg["trial"] == trial]
    if f"{metric}_mean" not in d or d[f"{metric}_mean"].isna().all():
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.bar(d["policy"].astype(str), d[f"{metric}_mean"], yerr=np.nan_to_num(d[f"{metric}_ci95"]), capsize=4)
    ax.set_ylabel(metric)
    ax.set_title(f"{trial}: {metric} (mean, 95 % CI over seeds)", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_sweep_tables(sweep: Sweep, cells: list[Cell], out: Path, failed: list[dict[str, Any]]) -> pd.DataFrame:
    """Write ``sweep.csv``, ``aggregate.csv``, ``failures.csv``, the plots and ``report.md``; return the table."""
    df = sweep_table(cells, out)
    fail_path = out / "failures.csv"
    if failed:
        pd.DataFrame(failed).to_csv(fail_path, index=False)
    else:
        fail_path.unlink(missing_ok=True)
    if df.empty:
        return df
    df.to_csv(out / "sweep.csv", index=False)
    df = pd.read_csv(out / "sweep.csv")  # the table as a reader of sweep.csv sees it (same dtypes)
    axes = sweep.axis_names()
    metrics = sweep.metric_names()
    agg = aggregate(df, axes, metrics)
    agg.to_csv(out / "aggregate.csv", index=False)
    plots = []
    for trial in dict.fromkeys(agg["trial"]):
        for m in metrics:
            if axes:
                for a in axes:
                    name = f"{safe_name(trial)}_{safe_name(m)}_vs_{safe_name(a)}.png"
                    if plot_metric(agg, trial, a, axes, m, out / name):
                        plots.append(name)
            else:
                name = f"{safe_name(trial)}_{safe_name(m)}.png"
                if plot_bars(agg, trial, m, out / name):
                    plots.append(name)
    _report(sweep, df, agg, cells, failed, plots, out)
    return df


def _report(sweep: Sweep, df, agg, cells, failed, plots, out: Path) -> None:
    metrics = [m for m in sweep.metric_names() if f"{m}_mean" in agg.columns]
    show = agg[["trial", *sweep.axis_names(), "policy", "seeds"]].copy()
    for m in metrics:
        show[m] = [pm(a, b, ci_fmt=".2g") for a, b in zip(agg[f"{m}_mean"], agg[f"{m}_ci95"])]
    lines = [f"# Sweep {sweep.name}", "",
             f"{len(df)} of {len(cells)} cells finished"
             + (f"; {len(failed)} failed in the last run (failures.csv)" if failed else "") + ".",
             "Mean ± 95 % confidence interval over seeds (Student t); seconds unless the column says otherwise. "
             "Per-cell rows: `sweep.csv`; results folders: `cells/`.", "", md_table(show), ""]
    lines += [f"![{p}]({p})" for p in plots]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def pm(mean: float, ci: float, fmt: str = ".4g", ci_fmt: str | None = None, unit: str = "",
       alone: str = "") -> str:
    """``mean ± ci`` (``fmt``, the half width in ``ci_fmt``, default ``fmt``) then ``unit``; without a CI
    (NaN: one seed) ``mean``, ``unit`` and ``alone``; "-" for a missing mean."""
    if not math.isfinite(mean):
        return "-"
    if not math.isfinite(ci):
        return f"{mean:{fmt}}{unit}{alone}"
    return f"{mean:{fmt}} ± {ci:{ci_fmt or fmt}}{unit}"
