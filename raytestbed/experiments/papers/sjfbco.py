"""SJF-BCO's numerical results (Yu et al., MobiHoc'22, §7, Figs. 4-7) as sweeps.

Setting (the paper's §7): the ``sjfbco`` workload (160 ring-all-reduce jobs: 80 x 1, 14 x 2,
26 x 4, 30 x 8, 8 x 16, 2 x 32 GPUs, Philly-scaled durations, all waiting at t = 0), the
``sjfbco_20servers`` cluster (20 servers of 4/8/16/32 GPUs, 10 Gbps), eq. (8) with xi1 = 1,
xi2 = 1e-4 s, alpha = 1 — the trial ``workloads/trials/sjfbco_paper.yaml``. Every schedule is
planned by the policy object and executed by the simulator (analytic ``sjfbco`` timing, the
paper's own model); Fig. 4 is also executed under ``flow`` timing (contention emerging from
the shared NICs, same plans; 50 iterations per coflow). A cell's seed draws the workload and
the policy's randomness.

* Fig. 4: makespan and average JCT of SJF-BCO, FF, LS, RAND (T = 1200 s);
* Fig. 5: SJF-BCO with kappa fixed to 1..32 (T = 1200 s);
* Fig. 6: the first 10..20 servers of the cluster (T = 1500 s);
* Fig. 7: SJF-BCO with kappa = 1 and lambda in {1, 2, 4, 8}.

``--quick``: seed 0 only, fewer points, no flow runs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from raytestbed.experiments.papers.figure import (NO_CELL_LOGS, TRIALS, Claim, Figure, cell_jobs, ci_shape,
                                                  run_seeds, shape)
from raytestbed.experiments.tables import ci95, pm
from raytestbed.results.tables import md_table
from raytestbed.experiments.spec import Axis, PolicySpec, Sweep, trial_with

TRIAL = TRIALS / "sjfbco_paper.yaml"
POLICIES = ["sjf-bco", "ff", "ls", "rand"]
SEEDS_FULL = [0, 1, 2, 3, 4]

PAPER = {
    "fig4": "SJF-BCO has the lowest makespan and the lowest average JCT of SJF-BCO, FF, LS and RAND "
            "(T = 1200); the advantage is largest when GPUs are scarce. The paper prints no numbers.",
    "fig5": "As kappa grows the makespan first drops, then rises (turning point 1), then drops slightly "
            "again (turning point 2).",
    "fig6": "From 10 to 20 servers the makespan of FF, LS and SJF-BCO decreases; FF gains the most.",
    "fig7": "With kappa = 1, the makespan decreases monotonically as lambda grows over {1, 2, 4, 8}.",
}



def _lines(policies=POLICIES) -> list[PolicySpec]:
    return [PolicySpec(p, p) for p in policies]


def fig4_sweep(quick: bool) -> Sweep:
    timings = [("analytic eq. 8", {})]
    if not quick:
        timings.append(("flow (emergent)", {"timing.mode": "flow", "timing.iterations_per_coflow": 50}))
    return Sweep("sjfbco_fig4", [trial_with(TRIAL, name="sjfbco_paper")], _lines(), run_seeds(SEEDS_FULL, quick), "sim",
                 [Axis("timing", tuple(timings))], ["makespan_s", "avg_jct_s"], **NO_CELL_LOGS)


def fig5_sweep(quick: bool) -> Sweep:
    kappas = [1, 2, 4, 8, 16, 32] if quick else list(range(1, 33))
    return Sweep("sjfbco_fig5", [trial_with(TRIAL, name="sjfbco_paper")], _lines(["sjf-bco"]),
                 run_seeds(SEEDS_FULL, quick), "sim",
                 [Axis.field("policy_params.sjf-bco.kappa", kappas)], ["makespan_s"], **NO_CELL_LOGS)


def first_servers(n: int) -> list[dict]:
    """The cluster file's first ``n`` servers (groups cut to ``n`` servers in order)."""
    servers, left = [], n
    for g in trial_with(TRIAL).cluster_config.servers:
        if left <= 0:
            break
        take = min(g.count, left)
        servers.append({**g.model_dump(mode="json"), "count": take})
        left -= take
    return servers


def fig6_sweep(quick: bool) -> Sweep:
    counts = [10, 15, 20] if quick else list(range(10, 21))
    points = tuple((n, {"cluster.servers": first_servers(n), "policy_params.@placement.horizon_s": 1500})
                   for n in counts)
    return Sweep("sjfbco_fig6", [trial_with(TRIAL, name="sjfbco_paper")], _lines(), run_seeds(SEEDS_FULL, quick), "sim",
                 [Axis("servers", points)], ["makespan_s", "avg_jct_s"], **NO_CELL_LOGS)


def fig7_sweep(quick: bool) -> Sweep:
    line = PolicySpec("sjf-bco[kappa=1]", "sjf-bco", {"kappa": 1})
    return Sweep("sjfbco_fig7", [trial_with(TRIAL, name="sjfbco_paper")], [line], run_seeds(SEEDS_FULL, quick), "sim",
                 [Axis.field("policy_params.sjf-bco.lam", [1.0, 2.0, 4.0, 8.0])], ["makespan_s"], **NO_CELL_LOGS)


def fig4_ours(df: pd.DataFrame, folder: Path) -> list[str]:
    jobs = cell_jobs(folder, df)
    split = jobs[jobs["servers"] > 1].groupby("cell").size()
    df = df.assign(split_jobs=df["cell"].map(split).fillna(0).astype(int))
    out = []
    for timing, a4 in df.groupby("timing", sort=False):
        seeds = sorted(a4["seed"].unique())
        n = len(seeds)
        g4 = a4.groupby("policy", sort=False)[["makespan_s", "avg_jct_s", "split_jobs"]].mean().reindex(POLICIES)
        base = g4.loc["sjf-bco", "makespan_s"]
        g4["makespan vs SJF-BCO"] = [f"{100 * (v / base - 1):+.2f}%" for v in g4["makespan_s"]]
        out += [f"Ours, {timing} execution (mean over {n} seed(s)):", "", md_table(g4.reset_index()), ""]
        if timing.startswith("analytic"):
            per = a4.pivot(index="seed", columns="policy", values="makespan_s")[POLICIES]
            jct = a4.pivot(index="seed", columns="policy", values="avg_jct_s")[POLICIES]
            wins = ", ".join(f"{int((per['sjf-bco'] < per[p]).sum())}/{n} seeds vs {p.upper()}"
                             for p in POLICIES[1:])
            jwins = ", ".join(f"{int((jct['sjf-bco'] < jct[p]).sum())}/{n} vs {p.upper()}" for p in POLICIES[1:])
            out += [f"SJF-BCO has the lower makespan in {wins}; the lower average JCT in {jwins}.", "",
                    "Makespan per seed (s):", "", md_table(per.reset_index()), ""]
    return out


def fig5_ours(df: pd.DataFrame, folder: Path) -> list[str]:
    col = "policy_params.sjf-bco.kappa"
    g5 = df.groupby(col)["makespan_s"].mean()
    t = g5.reset_index().rename(columns={col: "kappa", "makespan_s": "makespan_s (mean)"})
    return [f"Ours: shape of the mean curve over kappa = {int(g5.index.min())}..{int(g5.index.max())}: "
            f"**{shape(list(g5.values))}**. kappa only matters through which job sizes (1, 2, 4, 8, 16, 32) use "
            "FA-FFP, so the curve is a step function between those sizes.", "",
            md_table(t.drop_duplicates(subset=["makespan_s (mean)"], keep="first")), "",
            "(one row per distinct value; a kappa not listed has the value of the row above it)", ""]


def fig6_ours(df: pd.DataFrame, folder: Path) -> list[str]:
    g6 = df.groupby(["servers", "policy"])["makespan_s"].mean().unstack()[POLICIES]
    drop = {p: g6[p].iloc[0] - g6[p].iloc[-1] for p in POLICIES}
    return [f"Ours (mean makespan, s): drop from {g6.index[0]} to {g6.index[-1]} servers: "
            + ", ".join(f"{p.upper()} {drop[p]:.1f} s" for p in POLICIES) + ".", "", md_table(g6.reset_index()), ""]


def fig7_ours(df: pd.DataFrame, folder: Path) -> list[str]:
    col = "policy_params.sjf-bco.lam"
    g7 = df.groupby(col)["makespan_s"].mean()
    return [f"Ours: shape over lambda = {[float(x) for x in g7.index]}: **{shape(list(g7.values))}**.", "",
            md_table(g7.reset_index().rename(columns={col: "lambda"})), ""]


def _analytic(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["timing"].astype(str).str.startswith("analytic")]


def _lowest(col: str):
    """Reproduced: per seed, SJF-BCO's ``col`` below each baseline's, the reduction (%) above 0 over the
    95 % CI of the seeds (analytic eq. 8 execution, the paper's model)."""
    def check(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
        wide = _analytic(df).pivot_table(index="seed", columns="policy", values=col)
        red = {p: (100 * (1 - wide["sjf-bco"] / wide[p])).dropna().to_numpy() for p in POLICIES[1:]}
        ours = (f"sjf-bco {pm(wide['sjf-bco'].mean(), ci95(wide['sjf-bco'].to_numpy()), '.1f', unit=' s')}; "
                "lower than " + ", ".join(f"{p.upper()} by {pm(r.mean(), ci95(r), '.1f', unit=' %')}"
                                          for p, r in red.items()))
        if len(wide) < 2:
            lowest = all(r.mean() > 0 for r in red.values())
            return ours, ("partly: one seed, no confidence interval" if lowest else
                          "not reproduced: SJF-BCO is not the lowest on the one seed")
        above = [p.upper() for p, r in red.items() if r.mean() + ci95(r) < 0]
        if above:
            return ours, f"not reproduced: {', '.join(above)} lower than SJF-BCO over the 95 % CI of the seeds"
        tied = [p.upper() for p, r in red.items() if r.mean() - ci95(r) <= 0]
        if tied:
            return ours, (f"not reproduced: SJF-BCO not lower than {', '.join(tied)} over the 95 % CI of the "
                          "seeds (the difference's CI includes 0)")
        return ours, "reproduced (over the 95 % CI of the seeds)"
    return check


def _steps(curve: pd.Series) -> str:
    """``x: value s`` per point of a mean curve, a run of equal values as one ``first-last: value s``."""
    runs: list[list] = []
    for x, v in curve.items():
        if runs and abs(v - runs[-1][2]) <= 1e-6:
            runs[-1][1] = x
        else:
            runs.append([x, x, v])
    return ", ".join(f"{a:g}: {v:.0f} s" if a == b else f"{a:g}-{b:g}: {v:.0f} s" for a, b, v in runs)


def _shape_claim(col: str, want: str):
    """Reproduced: the moves of the makespan curve that hold over the 95 % CI of the seeds
    (:func:`~raytestbed.experiments.papers.figure.ci_shape`) are the paper's ``want``."""
    def check(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
        wide = df.pivot_table(index="seed", columns=col, values="makespan_s")
        g = wide.mean()
        got = ci_shape(wide)
        ours = f"{shape(list(g.values))} ({_steps(g)})"
        if got is None:
            return ours, "partly: one seed, no confidence interval"
        ours += f"; over the 95 % CI: {got}"
        if got == want:
            return ours, "reproduced (over the 95 % CI of the seeds)"
        return ours, f"not reproduced: {got} over the 95 % CI of the seeds, the paper {want}"
    return check


def _servers_check(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
    """Reproduced: per seed, the makespans of SJF-BCO, FF and LS fall from the fewest to the most
    servers, and FF's drop exceeds the others', each over the 95 % CI of the seeds."""
    counts = sorted(df["servers"].unique())
    drops = {}
    for p in ("sjf-bco", "ff", "ls"):
        wide = df[df["policy"] == p].pivot_table(index="seed", columns="servers", values="makespan_s")
        drops[p] = (wide[counts[0]] - wide[counts[-1]]).dropna()
    ours = "makespan falls by " + ", ".join(f"{p} {pm(d.mean(), ci95(d.to_numpy()), '.0f', unit=' s')}"
                                           for p, d in drops.items())
    ff_lead = pd.concat([drops["ff"] - drops[p] for p in ("sjf-bco", "ls")], axis=1).min(axis=1).to_numpy()
    if len(ff_lead) < 2:
        return ours, "partly: one seed, no confidence interval"
    falls = all(d.mean() - ci95(d.to_numpy()) > 0 for d in drops.values())
    if not falls:
        return ours, "not reproduced: not every makespan falls over the 95 % CI of the seeds"
    if ff_lead.mean() - ci95(ff_lead) > 0:
        return ours, "reproduced (over the 95 % CI of the seeds)"
    most = max(drops, key=lambda p: drops[p].mean())
    return ours, (f"partly: all fall over the 95 % CI, but FF's drop is not the largest over it "
                  f"({most.upper()} gains the most on the mean)")


FIGURES = [
    Figure("sjfbco", "fig4", "policy comparison (T = 1200 s)", PAPER["fig4"], fig4_sweep, fig4_ours,
           quick_note="seed 0, no flow execution",
           claims=(Claim("SJF-BCO has the lowest makespan (no numbers printed)", _lowest("makespan_s")),
                   Claim("SJF-BCO has the lowest average JCT (no numbers printed)", _lowest("avg_jct_s")))),
    Figure("sjfbco", "fig5", "kappa (T = 1200 s)", PAPER["fig5"], fig5_sweep, fig5_ours,
           quick_note="seed 0, kappa in {1, 2, 4, 8, 16, 32}",
           claims=(Claim("makespan vs kappa: drop, rise, drop (two turning points)",
                         _shape_claim("policy_params.sjf-bco.kappa", "drop, rise, drop")),)),
    Figure("sjfbco", "fig6", "number of servers (T = 1500 s)", PAPER["fig6"], fig6_sweep, fig6_ours,
           quick_note="seed 0, 10, 15 and 20 servers",
           claims=(Claim("10 -> 20 servers: FF, LS, SJF-BCO makespans fall; FF gains the most", _servers_check),)),
    Figure("sjfbco", "fig7", "lambda (kappa = 1)", PAPER["fig7"], fig7_sweep, fig7_ours, quick_note="seed 0",
           claims=(Claim("makespan falls monotonically as lambda grows over {1, 2, 4, 8}",
                         _shape_claim("policy_params.sjf-bco.lam", "drop")),)),
]
