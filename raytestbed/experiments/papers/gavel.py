"""Gavel's LAS figures (Narayanan et al., OSDI'20, §7.2, Figures 8 and 9) as sweeps.

Setting (Gavel's continuous-trace experiments, its repository's EXPERIMENTS.md): its simulated
cluster of 36 V100 + 36 P100 + 36 K80 (one GPU per server), 6-minute rounds, jobs drawn as its
simulator draws them while it runs (``workload.kind: gavel_generated``: Poisson arrivals at the input
rate, the Philly-fitted durations of 0.5-167 h on a V100, job types uniform over the Gavel throughput
data set's 26; Figure 9 adds 2-, 4- and 8-GPU jobs), seeds 0, 1, 2. The measured quantity is the
average JCT of jobs 4,000-4,999 (ids in arrival order), in hours, at each input rate (jobs/hour), for
LAS (``max_min_fairness``: every job the same share of GPU time, whatever the type) and Gavel's
heterogeneity-aware LAS (``max_min_fairness_perf``). Base trial: ``workloads/trials/gavel_continuous.yaml``.

Gavel's simulator stops once the window's jobs have finished, with jobs still arriving until then.
Each cell here draws the window's 5,000 jobs and ``rate x TAIL_H`` more, and stops its clock at the
last arrival (``timing.until_s``); a cell whose window jobs did not all finish by then is reported
("window finished" column), since its last window jobs met fewer newcomers than in Gavel's run.

* Fig. 8 (continuous-single): 1-GPU jobs, rates 0.4-6.0 jobs/h in steps of 0.4 (Gavel's sweep
  ``-a 0.0 -b 6.0 -n 16``).
* Fig. 9 (continuous-multiple): 1-8 GPU jobs, rates 0.2-3.0 jobs/h in steps of 0.2 (the points of
  the plotted figure; EXPERIMENTS.md's ``-n 11`` would give steps of 0.3).
* ``fig8-partial``: Fig. 8 at the paper's window and cluster, seed 0, rates 2.0 and 5.2 only (what fits
  a few CPU hours); its rows are marked ``partial``.

The paper's values (:data:`PAPER_FIG8`, :data:`PAPER_FIG9`) were read from the figure files in Gavel's
repository (stanford-futuredata/gavel, ``scheduler/notebooks/figures/evaluation/continuous_jobs/``,
``single_gpu_las_v100=36_p100=36_k80=36.pdf`` and ``multi_gpu_las_...pdf``): the vertices of each mean
line in the PDF's vector content, mapped to data units through the axis tick positions (exact to the
plot's rounding, about 0.01 h). None: the point lies above the plotted range (over 100 h).

``--quick``: a smoke test: 120 jobs (window 30-79), two rates (Fig. 8: 2.0 and 4.4, Fig. 9: 1.0 and 2.2), seed 0.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from raytestbed.experiments.papers.figure import NO_CELL_LOGS, TRIALS, Claim, Figure, run_seeds
from raytestbed.experiments.spec import Axis, PolicySpec, Sweep, trial_with
from raytestbed.results.tables import md_table

TRIAL = TRIALS / "gavel_continuous.yaml"
LAS, PERF = "max_min_fairness", "max_min_fairness_perf"
POLICIES = [LAS, PERF]
WINDOW = (4000, 5000)  #: job ids measured (end excluded), Gavel's ``-s 4000 -e 5000``
QUICK_WINDOW, QUICK_JOBS = (30, 80), 120
SEEDS = [0, 1, 2]
TAIL_H = 300.0  #: hours of arrivals drawn after the window's last job
#: relative difference to the paper's value within which a number counts as matching
TOL = 0.10

_R8 = [round(0.4 * i, 1) for i in range(1, 16)]
_R9 = [round(0.2 * i, 1) for i in range(1, 16)]
#: Figure 8, rate (jobs/h) -> (LAS, Gavel) average JCT, hours
PAPER_FIG8 = dict(zip(_R8, zip(
    [22.69, 22.79, 22.84, 22.96, 22.83, 22.87, 22.90, 22.91, 22.97, 22.92, 23.24, 34.75, 60.06, 91.29, None],
    [17.37, 17.44, 17.47, 17.38, 16.95, 16.30, 15.82, 15.74, 15.92, 16.26, 16.84, 18.02, 20.52, 26.42, 37.64])))
#: Figure 9, rate (jobs/h) -> (LAS, Gavel) average JCT, hours
PAPER_FIG9 = dict(zip(_R9, zip(
    [23.91, 23.86, 23.89, 24.02, 24.14, 24.08, 24.13, 24.25, 24.56, 25.22, 26.34, 36.70, 72.43, None, None],
    [17.29, 17.31, 17.33, 17.27, 17.22, 17.09, 17.02, 17.19, 17.76, 18.69, 20.53, 26.27, 32.52, 45.97, None])))
PARTIAL_RATES = [5.2, 2.0]  #: the costlier first (cells start in this order)
QUICK_NOTE = "120 jobs (window 30-79), two rates, seed 0"

PAPER = {
    "fig8": "Continuous-single trace (1-GPU jobs): heterogeneity-aware LAS has a lower average JCT than LAS at "
            "every input rate (17.4 vs 22.7 h at 0.4 jobs/h: LAS / Gavel 1.31) and sustains higher load: LAS's "
            "JCT rises past 4.4 jobs/h (34.8 h at 4.8, 91.3 h at 5.6), Gavel's past 4.8 (26.4 h at 5.6): LAS / "
            "Gavel 3.46 at 5.6 jobs/h (values read from the paper's figure).",
    "fig9": "Continuous-multiple trace (1-8 GPU jobs): heterogeneity-aware LAS is lower at every rate (17.3 vs "
            "23.9 h at 0.2 jobs/h: 1.38); LAS rises past 2.2 jobs/h (72.4 h at 2.6), Gavel past 2.4 (32.5 h at "
            "2.6: 2.23) (values read from the paper's figure).",
}


def _rates(fig: str, quick: bool) -> list[float]:
    if quick:
        return [1.0, 2.2] if fig == "fig9" else [2.0, 4.4]
    return {"fig8": _R8, "fig9": _R9, "fig8-partial": PARTIAL_RATES}[fig]


def window(quick: bool) -> tuple[int, int]:
    return QUICK_WINDOW if quick else WINDOW


def rate_point(rate: float, quick: bool) -> tuple[float, dict]:
    """The grid point of one input rate: the rate, the jobs drawn (the window's and ``rate x TAIL_H`` more;
    ``QUICK_JOBS`` with ``quick``) and the clock's stop at the expected last arrival (seconds)."""
    jobs = QUICK_JOBS if quick else WINDOW[1] + math.ceil(rate * TAIL_H)
    return rate, {"workload.rate_per_hour": rate, "workload.jobs": jobs, "timing.until_s": (jobs - 1) * 3600.0 / rate}


def _sweep(fig: str, multi_gpu: bool):
    def build(quick: bool) -> Sweep:
        trial = trial_with(TRIAL, {"workload.multi_gpu": multi_gpu}, name=f"gavel_{'multi' if multi_gpu else 'single'}")
        grid = [Axis("rate_per_hour", tuple(rate_point(r, quick) for r in _rates(fig, quick)))]
        seeds = run_seeds(SEEDS, quick or fig == "fig8-partial")
        return Sweep(f"gavel_{fig}", [trial], [PolicySpec(p, p) for p in POLICIES], seeds, "sim", grid,
                     ["avg_jct_s", "unfinished"], **NO_CELL_LOGS)
    return build


def window_table(df: pd.DataFrame, folder: Path, quick: bool) -> pd.DataFrame:
    """Per cell (rate, policy, seed): the window's jobs, how many finished before the clock stopped, and
    their average JCT in hours (``window_avg_jct_h``). A window job unfinished when the clock stopped counts
    with the time it had spent so far (stop - arrival): the average is then a lower bound (``window_finished``
    < ``window_jobs``), where Gavel's simulator would have run on until it finished."""
    import yaml

    lo, hi = window(quick)
    rows = []
    for _, c in df.iterrows():
        cell = folder / "cells" / c["cell"]
        j = pd.read_csv(cell / "jobs.csv", usecols=["job_id", "status", "arrival_s", "jct_s"])
        w = j[(j["job_id"] >= lo) & (j["job_id"] < hi)]
        done = w["status"] == "finished"
        jct = w["jct_s"].where(done)
        if not done.all():
            stop = yaml.safe_load((cell / "config.yaml").read_text(encoding="utf-8"))["timing"]["until_s"]
            jct = jct.fillna(stop - w["arrival_s"])
        rows.append({"rate_per_hour": float(c["rate_per_hour"]), "policy": c["policy"], "seed": int(c["seed"]),
                     "window_jobs": len(w), "window_finished": int(done.sum()),
                     "window_avg_jct_h": float(jct.mean()) / 3600 if len(w) else math.nan})
    return pd.DataFrame(rows)


def _means(wt: pd.DataFrame) -> pd.DataFrame:
    """Rate x policy: the window's average JCT (hours), mean over seeds, and LAS / Gavel."""
    m = wt.groupby(["rate_per_hour", "policy"])["window_avg_jct_h"].mean().unstack()
    m = m.reindex(columns=POLICIES)
    m["LAS / Gavel"] = m[LAS] / m[PERF]
    return m


def _paper(fig: str) -> dict:
    return PAPER_FIG9 if fig == "fig9" else PAPER_FIG8


def _fmt(v) -> str:
    return "> 100" if v is None else f"{v:.2f}"


def _ours(fig: str):
    def ours(df: pd.DataFrame, folder: Path) -> list[str]:
        quick = _is_quick(df)
        wt = window_table(df, folder, quick)
        wt.to_csv(folder / "window_jct.csv", index=False)
        m = _means(wt)
        paper = _paper(fig)
        rows = []
        for rate, r in m.iterrows():
            p = paper.get(round(rate, 1))
            rows.append({"rate (jobs/h)": rate, "LAS ours h": round(r[LAS], 2), "Gavel ours h": round(r[PERF], 2),
                         "LAS / Gavel ours": round(r["LAS / Gavel"], 3),
                         "LAS paper h": _fmt(p[0]) if p else "-", "Gavel paper h": _fmt(p[1]) if p else "-",
                         "LAS / Gavel paper": f"{p[0] / p[1]:.3f}" if p and p[0] and p[1] else "-"})
        short = wt[wt["window_finished"] < wt["window_jobs"]]
        lo, hi = window(quick)
        seeds = sorted(wt["seed"].unique())
        _plot(m, paper, folder / "window_jct.png", fig)
        return [f"Ours: average JCT of jobs {lo}-{hi - 1} (hours), mean over seed(s) {', '.join(map(str, seeds))}; "
                "the paper's read from its figure:", "", md_table(pd.DataFrame(rows)), "",
                (f"Cells whose window jobs did not all finish before the clock stopped (their average counts "
                 "each unfinished job with its time so far: a lower bound): "
                 + "; ".join(f"{r.policy} at {r.rate_per_hour:g} jobs/h seed {r.seed}: {r.window_finished}/"
                             f"{r.window_jobs}" for r in short.itertuples()) if len(short) else
                 "Every window job finished before the clock stopped in every cell."), "",
                "Per cell: `window_jct.csv`; plot: `window_jct.png`.", ""]
    return ours


def _plot(m: pd.DataFrame, paper: dict, path: Path, fig: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f, ax = plt.subplots(figsize=(6, 3.6))
    for pol, label, col in ((LAS, "LAS", "tab:blue"), (PERF, "Gavel (het.-aware LAS)", "tab:red")):
        ax.plot(m.index, m[pol], "o-", color=col, label=f"{label}, ours")
        i = 0 if pol == LAS else 1
        pts = [(r, v[i]) for r, v in sorted(paper.items()) if v[i] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "x--", color=col, alpha=0.6, label=f"{label}, paper")
    ax.set_xlabel("Input job rate (jobs/h)")
    ax.set_ylabel("Average JCT (h)")
    ax.set_ylim(0, 100)
    ax.set_title(f"Gavel {fig}: jobs of the measurement window")
    ax.legend(fontsize=7)
    f.tight_layout()
    f.savefig(path, dpi=110)
    plt.close(f)


def _is_quick(df: pd.DataFrame) -> bool:
    """Whether the cells ran ``--quick``'s short traces (fewer jobs than the paper's window ends at)."""
    return int(df["jobs"].min()) < WINDOW[1]


def _window(df: pd.DataFrame, folder: Path) -> pd.DataFrame:
    return _means(window_table(df, folder, _is_quick(df)))


def _lower_everywhere(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
    m = _window(df, folder)
    ours = ", ".join(f"{r:g}: {row[LAS]:.1f} vs {row[PERF]:.1f} h" for r, row in m.iterrows())
    worse = [r for r, row in m.iterrows() if not row[PERF] < row[LAS]]
    if not worse:
        return ours, "reproduced"
    return ours, f"not reproduced: heterogeneity-aware LAS is not lower at {', '.join(f'{r:g}' for r in worse)} jobs/h"


def _gap_grows(fig: str):
    def check(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
        m = _window(df, folder)
        ratio = m["LAS / Gavel"]
        paper = _paper(fig)
        pr = {r: v[0] / v[1] for r, v in paper.items() if v[0] and v[1]}
        ours = ", ".join(f"{r:g}: {v:.2f}" + (f" (paper {pr[round(r, 1)]:.2f})" if round(r, 1) in pr else "")
                         for r, v in ratio.items())
        lo, hi = ratio.index.min(), ratio.index.max()
        if lo == hi:
            raise ValueError(f"one input rate ({lo:g} jobs/h) was run; the claim needs two")
        if ratio[hi] > ratio[lo]:
            return ours, "reproduced"
        return ours, f"not reproduced: LAS / Gavel {ratio[hi]:.2f} at {hi:g} jobs/h, {ratio[lo]:.2f} at {lo:g}"
    return check


def _values_match(fig: str):
    def check(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
        m = _window(df, folder)
        paper = _paper(fig)
        off, parts = [], []
        for rate, row in m.iterrows():
            p = paper.get(round(rate, 1))
            if p is None:
                continue
            for pol, i, name in ((LAS, 0, "LAS"), (PERF, 1, "Gavel")):
                ref = p[i]
                parts.append(f"{name} {rate:g}: {row[pol]:.1f} ({_fmt(ref)})")
                if ref is None:
                    if not row[pol] > 100:
                        off.append(f"{name} at {rate:g} jobs/h {row[pol]:.1f} h, the paper > 100 h")
                elif abs(row[pol] / ref - 1) > TOL:
                    off.append(f"{name} at {rate:g} jobs/h {row[pol]:.1f} h vs {ref:.1f} h "
                               f"({100 * (row[pol] / ref - 1):+.0f} %)")
        ours = "; ".join(parts) + " (ours (paper), hours)"
        if not parts:
            return ours, "not evaluated: no rate of the paper's figure was run"
        if not off:
            return ours, f"reproduced (every value within {100 * TOL:.0f} %)"
        return ours, f"not reproduced: {'; '.join(off)}"
    return check


def _claims(fig: str) -> tuple[Claim, ...]:
    return (Claim("heterogeneity-aware LAS (Gavel) has the lower average JCT at every input rate", _lower_everywhere),
            Claim("the gap grows with the input rate (LAS / Gavel larger at the highest rate than at the lowest)",
                  _gap_grows(fig)),
            Claim(f"each policy's average JCT at each rate within {100 * TOL:.0f} % of the paper's figure",
                  _values_match(fig)))


FIGURES = [
    Figure("gavel", "fig8", "LAS vs heterogeneity-aware LAS, continuous-single trace", PAPER["fig8"],
           _sweep("fig8", False), _ours("fig8"), quick_note=QUICK_NOTE,
           claims=_claims("fig8")),
    Figure("gavel", "fig9", "LAS vs heterogeneity-aware LAS, continuous-multiple trace", PAPER["fig9"],
           _sweep("fig9", True), _ours("fig9"), quick_note=QUICK_NOTE,
           claims=_claims("fig9")),
    Figure("gavel", "fig8-partial", "Fig. 8 at the paper's window and cluster: seed 0, rates 2.0 and 5.2",
           PAPER["fig8"], _sweep("fig8-partial", False), _ours("fig8-partial"), default=False,
           quick_note=QUICK_NOTE, claims=_claims("fig8-partial"),
           partial="seed 0 and 2 of the paper's 15 rates, 2.0 and 5.2 jobs/h"),
]
