"""SJF-BCO eq. (8) estimate vs flow-level simulated iteration time, for jobs split over servers.

Each plan (SJF-BCO and RAND; RAND splits more jobs) of the paper workload is executed
in the simulator's ``flow`` mode with one iteration per coflow: every iteration is
compute followed by the job's ring coflow, whose flows share the NICs with all other
flows through the max-min rate allocator, so contention *emerges*. For every measured
iteration of a split job during which no job started or finished, the same moment's
eq. (8) estimate (:class:`raytestbed.core.timing.SjfbcoModel`, p_j from the running
jobs, k = xi1 p_j, f(alpha, k) = k + alpha (k - 1), gamma = xi2 #servers) is compared:
relative error = (estimate - flow) / flow, for the whole iteration and for its
communication part (flow: iteration - compute; estimate: the ring term, without gamma).

``--comm-fractions``: the workload's ring time alone on a link as a fraction of compute
(0.025 = the reproduction setting; larger = communication-heavy jobs). ``--alphas``:
degradation alpha of f (1 = the reproduction setting; 0 = plain equal sharing).
Iterations are scaled by ``--iteration-scale`` to bound the event count.

A calibration case is printed first: k identical split jobs with no compute on the same
two servers, where max-min sharing gives exactly k x the stand-alone ring time, i.e.
eq. (8) with alpha = 0.

    raytestbed bench sjfbco-flow [--quick] [--out results/sjfbco_model_vs_flow]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from raytestbed.resources import package_dir  # noqa: E402
from raytestbed.config import load_cluster  # noqa: E402
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile  # noqa: E402
from raytestbed.core.timing import SjfbcoModel, SjfbcoParams  # noqa: E402
from raytestbed.core.placement import Placement  # noqa: E402
from raytestbed.core.events import IterationMeasured, JobArrived, JobFinished, JobStarted, StartJob  # noqa: E402
from raytestbed.core.policy import Policy  # noqa: E402
from raytestbed.results.tables import md_table  # noqa: E402
from raytestbed.schedulers.base import make_policy  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.datadir import find_data_dir  # noqa: E402
from raytestbed.traces.sjfbco_workload import PHILLY_FILE, SjfbcoWorkloadParams, sjfbco_jobs  # noqa: E402

XI1, XI2 = 1.0, 1e-4


class Recorder:
    """Collects (flow, eq. 8) pairs for split-job iterations with an unchanged running set."""

    def __init__(self, sim: Simulator, alphas: list[float]) -> None:
        self.sim = sim
        self.models = {a: SjfbcoModel(SjfbcoParams(xi1=XI1, xi2_s=XI2, degradation_alpha=a)) for a in alphas}
        self.epoch = 0
        self.cycle_epoch: dict[int, int] = {}
        self.rows: list[dict] = []

    def __call__(self, ev) -> None:
        if isinstance(ev, (JobStarted, JobFinished)):
            self.epoch += 1
            if isinstance(ev, JobStarted):
                self.cycle_epoch[ev.job_id] = self.epoch
            return
        if not isinstance(ev, IterationMeasured):
            return
        jid = ev.job_id
        start_epoch = self.cycle_epoch.get(jid)
        self.cycle_epoch[jid] = self.epoch
        if start_epoch != self.epoch:
            return  # a job started or finished during this iteration
        state = self.sim.state
        rj = state.running.get(jid)
        if rj is None:
            return
        cluster = self.sim.cluster
        servers = rj.placement.servers(cluster)
        if len(servers) < 2:
            return
        others = {k: (r.job, r.placement) for k, r in state.running.items() if k != jid}
        row = {"job": jid, "t": ev.time, "gpus": rj.job.gpus, "servers": len(servers), "flow_s": ev.seconds,
               "compute_s": ev.compute_s, "flow_comm_s": ev.seconds - ev.compute_s}
        for a, m in self.models.items():
            est = m.iteration_time(rj.job, rj.placement, cluster, others)
            row[f"eq8_a{a:g}_s"] = est
        self.rows.append(row)


class _FixedPairs(Policy):
    """Calibration only: job i runs on GPU i of server 0 and GPU i of server 1 (split, 1 + 1)."""

    name = "fixed-pairs"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            i, g = event.job.job_id, view.cluster.servers[0].gpus
            return [StartJob(i, Placement(((i, g + i),)))]
        return []


def calibration(k: int = 3) -> dict:
    """k pure-communication split jobs on servers {0, 1}: flow vs eq. (8) per iteration (seconds)."""
    from raytestbed.core.cluster import Cluster, Server
    from raytestbed.core.timing import sjfbco_iteration_time

    bw = 1.25e9
    cluster = Cluster((Server(0, k, bw, bw), Server(1, k, bw, bw)), 3e11)
    jobs = [Job(i, 0.0, 20, (Stage(2, StageProfile(0.0, 0.0, 0.0, 50e6)),), CommPattern.RAR) for i in range(k)]
    res = Simulator(cluster, jobs, _FixedPairs(), mode="flow", iterations_per_coflow=1).run()
    out = {"jobs": k, "flow_s": float(np.mean([r.iteration_time_s for r in res.records]))}
    for a in (0.0, 1.0):
        out[f"eq8_a{a:g}_s"] = sjfbco_iteration_time(jobs[0], 2, k, bw, 3e11,
                                                     SjfbcoParams(xi1=1.0, xi2_s=0.0, degradation_alpha=a))
    out["standalone_s"] = sjfbco_iteration_time(jobs[0], 2, 1, bw, 3e11, SjfbcoParams())
    return out


def run_case(seed: int, policy: str, comm_fraction: float, scale: float, alphas: list[float]) -> pd.DataFrame:
    cluster = load_cluster(package_dir("clusters") / "sjfbco_20servers.yaml").build()
    data = find_data_dir(rel=PHILLY_FILE)
    durations = "philly" if data is not None and (data / "philly-jobs-rfold").is_dir() else "uniform"
    jobs = sjfbco_jobs(SjfbcoWorkloadParams(durations=durations, comm_fraction=comm_fraction), seed,
                       cluster.nic_bps, data)
    for j in jobs:
        j.iterations = max(1, round(j.iterations * scale))
    pol = make_policy(policy, "placement", seed=seed, horizon_s=1200, xi1=XI1, xi2_s=XI2, degradation_alpha=1.0)
    hook: list[Recorder] = []
    sim = Simulator(cluster, jobs, pol, mode="flow", iterations_per_coflow=1, on_event=lambda ev: hook[0](ev))
    rec = Recorder(sim, alphas)
    hook.append(rec)
    sim.run()
    df = pd.DataFrame(rec.rows)
    df["seed"], df["policy"], df["comm_fraction"] = seed, policy, comm_fraction
    return df


def summarize(df: pd.DataFrame, alphas: list[float]) -> pd.DataFrame:
    rows = []
    for (pol, cf), g in df.groupby(["policy", "comm_fraction"]):
        for a in alphas:
            est = g[f"eq8_a{a:g}_s"]
            err = (est - g.flow_s) / g.flow_s
            est_comm = est - g.compute_s - XI2 * g.servers  # ring term only (flow has no overhead term)
            cerr = (est_comm - g.flow_comm_s) / g.flow_comm_s
            q = np.percentile(err, [5, 25, 50, 75, 95])
            rows.append({
                "policy": pol, "comm_fraction": cf, "alpha": a, "samples": len(g), "jobs": g.job.nunique(),
                "err_p5": q[0], "err_p25": q[1], "err_median": q[2], "err_p75": q[3], "err_p95": q[4],
                "err_mean": float(err.mean()), "comm_err_median": float(np.median(cerr)),
                "comm_err_p95": float(np.percentile(cerr, 95)),
            })
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path("results") / "sjfbco_model_vs_flow"))
    ap.add_argument("--quick", action="store_true", help="one seed, one comm fraction, coarser scale")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iteration-scale", type=float, default=0.05)
    ap.add_argument("--comm-fractions", default="0.025,0.25")
    ap.add_argument("--alphas", default="1,0")
    args = ap.parse_args(argv)
    try:
        cfs = [float(x) for x in args.comm_fractions.split(",")]
        alphas = [float(x) for x in args.alphas.split(",")]
    except ValueError:
        print("sjfbco_model_vs_flow: --comm-fractions/--alphas must be comma-separated numbers", file=sys.stderr)
        return 2
    if args.seeds < 1 or not 0 < args.iteration_scale <= 1:
        print("sjfbco_model_vs_flow: --seeds >= 1 and 0 < --iteration-scale <= 1", file=sys.stderr)
        return 2
    seeds = [0] if args.quick else list(range(args.seeds))
    scale = 0.02 if args.quick else args.iteration_scale
    cfs = cfs[:1] if args.quick else cfs
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cal = calibration()
    print(f"calibration: {cal['jobs']} pure-communication split jobs on one server pair: flow "
          f"{cal['flow_s'] * 1e3:.2f} ms/iteration, eq. 8 alpha=0 {cal['eq8_a0_s'] * 1e3:.2f} ms, "
          f"alpha=1 {cal['eq8_a1_s'] * 1e3:.2f} ms (alone {cal['standalone_s'] * 1e3:.2f} ms)", flush=True)
    frames = []
    for cf in cfs:
        for s in seeds:
            for pol in ("sjf-bco", "rand"):
                df = run_case(s, pol, cf, scale, alphas)
                print(f"comm_fraction {cf} seed {s} {pol}: {len(df)} split-job iterations", flush=True)
                frames.append(df)
    samples = pd.concat(frames, ignore_index=True)
    samples.to_csv(out / "samples.csv", index=False)
    summ = summarize(samples, alphas)
    summ.to_csv(out / "summary.csv", index=False)

    fig, axes = plt.subplots(1, len(cfs), figsize=(5 * len(cfs), 4), squeeze=False)
    for ax, cf in zip(axes[0], cfs):
        g = samples[samples.comm_fraction == cf]
        for a in alphas:
            err = 100 * (g[f"eq8_a{a:g}_s"] - g.flow_s) / g.flow_s
            ax.hist(err, bins=60, alpha=0.6, label=f"alpha = {a:g}")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_xlabel("eq. 8 estimate vs flow-level iteration time (%)")
        ax.set_ylabel("split-job iterations")
        ax.set_title(f"comm_fraction = {cf}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "error_hist.png", dpi=110)
    plt.close(fig)

    lines = [
        "# SJF-BCO eq. (8) vs flow-level iteration time (split jobs)",
        "",
        f"Command: `scripts/sjfbco_model_vs_flow.py{' --quick' if args.quick else ''}`; seeds {seeds}, "
        f"iteration scale {scale}, xi1 = {XI1}, xi2 = {XI2} s; wall {time.perf_counter() - t0:.0f} s.",
        "",
        f"Calibration ({cal['jobs']} pure-communication split jobs sharing one server pair): flow "
        f"{cal['flow_s'] * 1e3:.2f} ms, eq. 8 alpha = 0: {cal['eq8_a0_s'] * 1e3:.2f} ms, alpha = 1: "
        f"{cal['eq8_a1_s'] * 1e3:.2f} ms.",
        "",
        "Relative error (estimate - flow) / flow of the whole iteration (err_*) and of its communication "
        "part (comm_err_*), as fractions:",
        "",
        md_table(summ.map(lambda v: f"{v:+.3f}" if isinstance(v, float) else v)),
    ]
    (out / "model_vs_flow.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0

