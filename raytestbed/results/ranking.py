"""Which policy of a comparison did best, said honestly.

A policy that left jobs unfinished (or finished none) is not ranked: its total JCT counts only the
jobs it finished, so a policy that starts nothing would "win" with 0 s. The others are ranked by
total JCT (seconds); totals within a relative :data:`TIE_REL` of each other share a rank and are
reported as a tie. Used by ``comparison.csv`` (``rank``), ``report.md`` and ``raytestbed compare``.
"""

from __future__ import annotations

import math

import pandas as pd

TIE_REL = 1e-9  #: total JCTs within this relative difference are a tie (float rounding only)


def complete(row) -> bool:
    """Every job of the run finished (and there was at least one)."""
    finished = int(row.get("finished", 0) or 0)
    unfinished = row.get("unfinished")
    if unfinished is None or (isinstance(unfinished, float) and math.isnan(unfinished)):
        unfinished = int(row.get("jobs", finished) or 0) - finished
    return finished > 0 and int(unfinished) == 0


def ranks(df: pd.DataFrame) -> pd.Series:
    """Rank by total JCT of every complete policy (1 = lowest; ties share the smaller rank); NaN for the
    others (unfinished jobs or no finished job)."""
    out = pd.Series(math.nan, index=df.index, dtype=float)
    ok = [i for i, r in df.iterrows() if complete(r)]
    totals = sorted((float(df.at[i, "total_jct_s"]), i) for i in ok)
    rank, prev = 0, None
    for n, (t, i) in enumerate(totals, start=1):
        if prev is None or not _tie(t, prev):
            rank = n
        out[i] = rank
        prev = t
    return out


def _tie(a: float, b: float) -> bool:
    return abs(a - b) <= TIE_REL * max(abs(a), abs(b), 1e-12)


def not_ranked(df: pd.DataFrame) -> list[str]:
    """``buggy (12 of 12 jobs unfinished)`` for every policy left out of the ranking."""
    out = []
    for _, r in df.iterrows():
        if not complete(r):
            jobs = int(r.get("jobs", 0) or 0)
            left = jobs - int(r.get("finished", 0) or 0)
            out.append(f"{r['policy']} ({left} of {jobs} jobs unfinished)")
    return out


def summary_line(df: pd.DataFrame) -> str:
    """``Lowest total JCT: asrpt``, ``Lowest total JCT: fifo and asrpt (tie)``, plus the policies not ranked."""
    r = ranks(df)
    best = [str(df.at[i, "policy"]) for i in df.index if r[i] == 1]
    if not best:
        line = "No policy is ranked: every policy left jobs unfinished"
    elif len(best) == 1:
        line = f"Lowest total JCT: {best[0]}"
    else:
        line = f"Lowest total JCT: {', '.join(best[:-1])} and {best[-1]} (tie)"
    left = not_ranked(df)
    if left and best:
        line += f"; not ranked (jobs unfinished): {', '.join(left)}"
    elif left:
        line += f": {', '.join(left)}"
    return line


def rank_labels(df: pd.DataFrame) -> list[str]:
    """The ``rank`` column for people: ``1``, ``2 (tie)``, ``not ranked: 3 jobs unfinished``."""
    r = df["rank"] if "rank" in df.columns else ranks(df)
    counts = r.value_counts()
    out = []
    for i in df.index:
        if pd.isna(r[i]):
            jobs = int(df.at[i, "jobs"]) if "jobs" in df.columns else 0
            left = jobs - int(df.at[i, "finished"]) if "finished" in df.columns else 0
            out.append(f"not ranked: {left} jobs unfinished")
        else:
            out.append(f"{int(r[i])}" + (" (tie)" if counts[r[i]] > 1 else ""))
    return out
