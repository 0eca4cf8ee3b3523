"""Parity between two backends (or two timing modes) on the same trial.

Given two ``compare`` folders made from the same trial, seed and policies (for
instance the simulator and the emulator), report per policy the relative
difference of total JCT and makespan (``(b - a) / a``), the per-job JCT
differences, and whether the policy ranking by total JCT agrees. The check passes
when every |relative difference| <= ``limit``, no job finished on one side only (a job unfinished
on one side fails the check; its JCT difference cannot be measured) and no two policies are ordered
oppositely (ties, within a relative 1e-6, are compatible with either order; see :func:`rankings_agree`).

Per job, besides the JCTs, both sides' first start, placement and mean iteration time (first
start to finish over the iterations), so that a residual can be told apart: a job that iterates
at another speed in the same placement is a model difference; one that starts later in the same
placement waits behind other jobs; one placed elsewhere saw another cluster state. ``parity.md`` lists, per policy, the jobs with the
largest JCT differences in seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from raytestbed.results.tables import md_table
from raytestbed.results.writer import policy_folder


def _ranking(df: pd.DataFrame) -> list[str]:
    return df.sort_values(["total_jct_s", "policy"])["policy"].astype(str).tolist()


TIE_REL = 1e-6  #: total JCTs within this relative difference count as a tie
_JOB_COLUMNS = ("first_start_s", "placement", "mean_iteration_s")  #: per job, from both sides
_JOB_INFO = ("model", "comm", "stages")  #: per job, what it is
LARGEST = 5  #: jobs per policy in parity.md's table of the largest differences


def rankings_agree(a: dict[str, float], b: dict[str, float], tie_rel: float = TIE_REL) -> bool:
    """True unless some pair of policies is strictly ordered one way by ``a`` and the other way by ``b``.

    ``a`` and ``b`` map policy -> total JCT (seconds). A tie (relative difference <= ``tie_rel``)
    on either side is compatible with any order on the other, so tied policies are not reported
    as a ranking difference just because of how ties are listed.
    """
    def order(x: dict[str, float], p: str, q: str) -> int:
        d = x[p] - x[q]
        return 0 if abs(d) <= tie_rel * max(abs(x[p]), abs(x[q]), 1e-12) else (1 if d > 0 else -1)

    pols = [p for p in a if p in b]
    return all(order(a, p, q) * order(b, p, q) >= 0 for i, p in enumerate(pols) for q in pols[i + 1:])


def _with_mean_iteration(jobs: pd.DataFrame) -> pd.DataFrame:
    """``jobs`` with ``mean_iteration_s``: (finish - first start) / iterations, seconds -- the job's
    speed over its whole run (a single iteration's time may alternate between values from one
    iteration to the next; a preempted job's wait between runs counts too)."""
    if {"finish_s", "first_start_s", "iterations"} <= set(jobs.columns):
        jobs = jobs.assign(mean_iteration_s=(jobs["finish_s"] - jobs["first_start_s"]) / jobs["iterations"])
    return jobs


def parity(a_dir: Path, b_dir: Path, limit: float = 0.10, a_name: str = "a", b_name: str = "b") -> dict:
    """Compare two compare-folders; returns a dict with ``policies`` and ``jobs`` DataFrames and the verdict."""
    a = pd.read_csv(Path(a_dir) / "comparison.csv")
    b = pd.read_csv(Path(b_dir) / "comparison.csv")
    common = [p for p in a["policy"].astype(str) if p in set(b["policy"].astype(str))]
    if not common:
        raise ValueError("the two folders share no policy")
    rows, job_frames = [], []
    for pol in common:
        ra = a[a["policy"].astype(str) == pol].iloc[0]
        rb = b[b["policy"].astype(str) == pol].iloc[0]
        d_total = (rb["total_jct_s"] - ra["total_jct_s"]) / ra["total_jct_s"]
        d_mk = (rb["makespan_s"] - ra["makespan_s"]) / ra["makespan_s"]
        ja = _with_mean_iteration(pd.read_csv(Path(a_dir) / policy_folder(pol) / "jobs.csv"))
        jb = _with_mean_iteration(pd.read_csv(Path(b_dir) / policy_folder(pol) / "jobs.csv"))
        both = [c for c in _JOB_COLUMNS if c in ja.columns and c in jb.columns]
        info = [c for c in _JOB_INFO if c in ja.columns]  # what the job is: the same on both sides
        status = [c for c in ("status",) if c in ja.columns and c in jb.columns]
        j = ja[["job_id", *info, *status, "jct_s", *both]].merge(jb[["job_id", *status, "jct_s", *both]],
                                                                 on="job_id", suffixes=(f"_{a_name}", f"_{b_name}"))
        # a job finished on one side only is a failure of the check, never a NaN difference left out
        one_side = (j[f"status_{a_name}"] != j[f"status_{b_name}"]) if status else pd.Series(False, index=j.index)
        j["diff_s"] = j[f"jct_s_{b_name}"] - j[f"jct_s_{a_name}"]
        j["rel_diff"] = j["diff_s"] / j[f"jct_s_{a_name}"]
        if "placement" in both:
            j["same_placement"] = j[f"placement_{a_name}"].astype(str) == j[f"placement_{b_name}"].astype(str)
        j.insert(0, "policy", pol)
        job_frames.append(j)
        rel = j["rel_diff"].abs().dropna().to_numpy()
        unfinished_a = int((j[f"status_{a_name}"] != "finished").sum()) if status else 0
        unfinished_b = int((j[f"status_{b_name}"] != "finished").sum()) if status else 0
        within = bool(abs(d_total) <= limit and abs(d_mk) <= limit and not one_side.any())
        rows.append({
            "policy": pol,
            f"total_jct_s_{a_name}": ra["total_jct_s"], f"total_jct_s_{b_name}": rb["total_jct_s"],
            "total_jct_rel_diff": d_total,
            f"makespan_s_{a_name}": ra["makespan_s"], f"makespan_s_{b_name}": rb["makespan_s"],
            "makespan_rel_diff": d_mk,
            "job_jct_rel_diff_median": float(np.median(rel)) if rel.size else float("nan"),
            "job_jct_rel_diff_p90": float(np.percentile(rel, 90)) if rel.size else float("nan"),
            f"unfinished_{a_name}": unfinished_a, f"unfinished_{b_name}": unfinished_b,
            "unfinished_one_side": " ".join(str(int(x)) for x in j.loc[one_side, "job_id"]),  # job ids
            "within_limit": within,
        })
    pol_df = pd.DataFrame(rows)
    rank_a = _ranking(a[a["policy"].astype(str).isin(common)])
    rank_b = _ranking(b[b["policy"].astype(str).isin(common)])
    totals = lambda df: dict(zip(df["policy"].astype(str), df["total_jct_s"].astype(float)))  # noqa: E731
    ranking_agrees = rankings_agree(totals(a[a["policy"].astype(str).isin(common)]),
                                    totals(b[b["policy"].astype(str).isin(common)]))
    return {
        "policies": pol_df,
        "jobs": pd.concat(job_frames, ignore_index=True),
        "ranking_a": rank_a,
        "ranking_b": rank_b,
        "ranking_agrees": ranking_agrees,
        "limit": limit,
        "passed": bool(pol_df["within_limit"].all() and ranking_agrees),
    }


def write_parity(result: dict, out: Path, a_name: str = "a", b_name: str = "b") -> Path:
    """Write ``parity.csv``, ``parity_jobs.csv`` and ``parity.md`` into ``out``."""
    out = Path(out)
    result["policies"].to_csv(out / "parity.csv", index=False)
    result["jobs"].to_csv(out / "parity_jobs.csv", index=False)
    verdict = "PASS" if result["passed"] else "FAIL"
    text = f"""# Parity: {a_name} vs {b_name}

Relative differences are ({b_name} - {a_name}) / {a_name}; limit ±{result['limit']:.0%}.

{md_table(result['policies'])}

Ranking by total JCT — {a_name}: {', '.join(result['ranking_a'])}; {b_name}: {', '.join(result['ranking_b'])}
({'identical' if result['ranking_agrees'] else 'different'}).

**{verdict}**
{_largest(result["jobs"], a_name, b_name)}"""
    p = out / "parity.md"
    p.write_text(text, encoding="utf-8")
    return p


def _largest(jobs: pd.DataFrame, a_name: str, b_name: str) -> str:
    """Markdown: per policy, the :data:`LARGEST` jobs with the largest |JCT difference| (seconds)."""
    if jobs.empty:
        return ""
    cols = [c for c in ("job_id", "model", "comm", "stages", f"jct_s_{a_name}", f"jct_s_{b_name}", "diff_s",
                        f"first_start_s_{a_name}", f"first_start_s_{b_name}", f"mean_iteration_s_{a_name}",
                        f"mean_iteration_s_{b_name}", f"placement_{a_name}", "same_placement") if c in jobs.columns]
    out = [f"\n## Largest per-job differences (JCT {b_name} - {a_name}, seconds)\n",
           "Same placement and another mean iteration time (first start to finish): the two models differ "
           "on that job; same placement and another first start: it waited behind other jobs; another "
           "placement: it saw another cluster state. Every job: `parity_jobs.csv`.\n"]
    for pol, g in jobs.groupby("policy", sort=False):
        top = g.reindex(g["diff_s"].abs().sort_values(ascending=False).index).head(LARGEST)
        out += [f"### {pol}\n", *_breakdown(g, a_name, b_name), md_table(top[cols], digits=6), ""]
    return "\n".join(out)


SPEED_REL = 0.01  #: mean iteration times further apart than this count as "another speed"


def _breakdown(g: pd.DataFrame, a_name: str, b_name: str) -> list[str]:
    """One line: the policy's total JCT difference split by what the jobs' differences come from."""
    ia, ib = f"mean_iteration_s_{a_name}", f"mean_iteration_s_{b_name}"
    if "same_placement" not in g.columns or ia not in g.columns or ib not in g.columns:
        return []
    moved = ~g["same_placement"].astype(bool)
    speed = ~moved & ((g[ib] / g[ia] - 1.0).abs() > SPEED_REL)
    rest = ~moved & ~speed
    part = lambda m: f"{g.loc[m, 'diff_s'].sum():+,.1f} s ({int(m.sum())} job{'' if m.sum() == 1 else 's'})"  # noqa: E731
    return [f"Total JCT difference {g['diff_s'].sum():+,.1f} s = {part(speed)} from jobs in the same placement "
            f"iterating more than {SPEED_REL:.0%} apart, {part(moved)} from jobs placed differently, "
            f"{part(rest)} from the others (same placement and speed: they started or waited differently).\n"]
