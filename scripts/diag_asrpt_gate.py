"""Where A-SRPT's queueing comes from on one seed of a trial (diagnostic; docs/reproductions.md).

Simulates A-SRPT, A-SRPT-Perfect and one baseline (default WCS-SubTime) on the trial's jobs, as
``raytestbed compare --backend sim`` does (same workload, history and policy parameters), and
records for the two A-SRPT runs each job's completion time in the virtual instance Ã1. A job's
queueing delay (start − arrival) then splits into

* ``gate``: arrival → completion in Ã1 (Alg. 1 L2: a job enters ``pending_queue`` only then),
* ``pending``: completion in Ã1 → start (head-of-line blocking, L5/L25, and delay windows, L16).

It prints both sums per policy, the delay windows entered, and the (group, ñ) sets of jobs that
contribute most to A-SRPT's queueing above A-SRPT-Perfect's, with the virtual load each set offers
over its arrival span with the predicted and with the true iteration counts.

    PYTHONPATH=. .venv/bin/python scripts/diag_asrpt_gate.py workloads/trials/asrpt_aaic_paper.yaml --seed 3
    PYTHONPATH=. .venv/bin/python scripts/diag_asrpt_gate.py --workload google --n 1500 --seed 1   # a reproduce_asrpt point
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import pandas as pd

from raytestbed.config import load_trial
from raytestbed.core.timing import make_iteration_model
from raytestbed.schedulers.asrpt import AsrptPolicy, VirtualSrpt
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload
from raytestbed.trial import with_workload_history


class RecordingSrpt(VirtualSrpt):
    """:class:`VirtualSrpt` that keeps each job's completion time in Ã1 (same schedule)."""

    def __init__(self) -> None:
        super().__init__()
        self.done_at: dict[int, float] = {}

    def advance(self, t: float) -> list[int]:
        done: list[int] = []
        while True:  # step from completion to completion so that each one's time is known
            nxt = self.next_completion()
            if nxt is None or nxt > t:
                break
            for j in super().advance(nxt):
                self.done_at[j] = self.now
                done.append(j)
        for j in super().advance(t):  # completions within the float tolerance of t
            self.done_at[j] = self.now
            done.append(j)
        return done


def simulate(loaded, name: str, seed: int) -> tuple[pd.DataFrame, AsrptPolicy | None]:
    trial = loaded.trial
    cluster = loaded.cluster_config.build()
    wl = trial.workload.model_dump()
    kind = wl.pop("kind")
    jobs = load_workload(kind, wl, cluster, seed, loaded.base_dir, where="diag: workload")
    params = with_workload_history(name, trial.policy_params.get(name, {}), jobs)
    model = make_iteration_model(trial.timing.model, **trial.timing.model_params)
    return simulate_jobs(cluster, jobs, name, seed, params, model)


def reproduce_point(a) -> tuple:
    """(cluster, jobs, history) of one point of scripts/reproduce_asrpt.py (its make_jobset, same seed)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import reproduce_asrpt as R
    from raytestbed.config import CLUSTER_CONFIG_DIR, load_cluster
    cc = load_cluster(CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
    cc = cc.model_copy(update={"servers": [cc.servers[0].model_copy(update={"count": a.servers})]})
    if a.nic_gbps is not None:
        jobs_cluster = cc.build()  # jobs built on the 10 Gbps cluster, as the script's nic sweep
        cc = cc.model_copy(update={"nic_gbps": a.nic_gbps})
    cluster = cc.build()
    base = jobs_cluster if a.nic_gbps is not None else cluster
    rows = R.read_trace(a.workload, a.seed, base.total_gpus)
    scale = R.trace_busy_gpus(rows) / (base.total_gpus * a.load)
    js = R.make_jobset(rows, a.n, a.history, a.seed, base, scale, a.single)
    return cluster, js, lambda name: R.policy_params(name, None, js.history, max(50, a.n // 10))


def simulate_jobs(cluster, jobs, name: str, seed: int, params: dict, model) -> tuple[pd.DataFrame, AsrptPolicy | None]:
    """One simulation; for an A-SRPT policy each job's completion time in Ã1 is recorded."""
    policy = make_policy(name, "placement", seed, **params)
    if isinstance(policy, AsrptPolicy):
        policy._virt = RecordingSrpt()
    res = Simulator(cluster, [copy.copy(j) for j in jobs], policy, model=model).run()
    rows = [dict(job_id=r.job.job_id, arrival_s=r.job.arrival_s, start_s=r.first_start_s, finish_s=r.finish_s,
                 gpus=r.job.gpus, iterations=r.job.iterations, group=r.job.group) for r in res.records]
    df = pd.DataFrame(rows).set_index("job_id")
    df["queue_s"] = df.start_s - df.arrival_s
    df["run_s"] = df.finish_s - df.start_s
    if isinstance(policy, AsrptPolicy):
        df["n_pred"] = pd.Series(policy.predictions)
        df["virtual_done_s"] = pd.Series(policy._virt.done_at)
        df["gate_s"] = df.virtual_done_s - df.arrival_s
        df["pending_s"] = df.start_s - df.virtual_done_s
        df["p_virt_s"] = df.gpus / cluster.total_gpus * df.n_pred * pd.Series(
            {j.job_id: policy._est.bounds(j)[0] for j in jobs})
        return df, policy
    return df, None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trial", type=Path, nargs="?")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workload", default=None, help="instead of a trial: one point of scripts/reproduce_asrpt.py "
                    "on this trace (e.g. google) with --n, --history, --servers, --load, --single, --nic-gbps")
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--history", type=int, default=500)
    ap.add_argument("--servers", type=int, default=5)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--single", type=float, default=None)
    ap.add_argument("--nic-gbps", type=float, default=None)
    ap.add_argument("--csv", type=Path, default=None, help="write the per-job table of the three runs here")
    ap.add_argument("--baseline", default="wcs-subtime")
    ap.add_argument("--top", type=int, default=5, help="(group, prediction) sets to list")
    a = ap.parse_args(argv)
    names = ("asrpt", "asrpt-perfect", a.baseline)
    if a.workload is not None:
        cluster, js, params = reproduce_point(a)
        model = make_iteration_model("asrpt")
        runs = {name: simulate_jobs(cluster, js.jobs, name, a.seed, params(name), model) for name in names}
    else:
        loaded = load_trial(a.trial)
        runs = {name: simulate(loaded, name, a.seed) for name in names}
    if a.csv is not None:
        pd.concat({name: df for name, (df, _) in runs.items()}, names=["policy"]).to_csv(a.csv)
    print(f"seed {a.seed}: sums over {len(runs['asrpt'][0])} jobs, seconds")
    for name, (df, pol) in runs.items():
        line = f"{name:<14} total JCT {(df.finish_s - df.arrival_s).sum():.4e}  queue {df.queue_s.sum():.4e}" \
               f"  run {df.run_s.sum():.4e}"
        if pol is not None:
            line += f"  gate {df.gate_s.sum():.4e}  pending {df.pending_s.sum():.4e}  delay windows {pol.delayed}" \
                    f"  queue of unseen (ñ=0) {df.queue_s[df.n_pred == 0].sum():.3e}"
        print(line)
    A, P = runs["asrpt"][0], runs["asrpt-perfect"][0]
    extra = A.queue_s - P.queue_s
    key = A.group + " ñ=" + A.n_pred.astype(str)
    g = pd.DataFrame({"extra": extra, "key": key, "p_pred": A.p_virt_s, "p_true": P.p_virt_s,
                      "arr": A.arrival_s, "n": A.iterations, "n_pred": A.n_pred, "gate_a": A.gate_s,
                      "gate_p": P.gate_s}).groupby("key").agg(
        jobs=("extra", "size"), extra_queue_s=("extra", "sum"), first=("arr", "min"), last=("arr", "max"),
        virt_pred_s=("p_pred", "sum"), virt_true_s=("p_true", "sum"), n_pred=("n_pred", "first"),
        n_mean=("n", "mean"), gate_asrpt=("gate_a", "mean"), gate_perfect=("gate_p", "mean"))
    g = g.sort_values("extra_queue_s", ascending=False).head(a.top)
    span = (g["last"] - g["first"]).clip(lower=1.0)
    g["load_pred"] = g.virt_pred_s / span
    g["load_true"] = g.virt_true_s / span
    print(f"\nA-SRPT queue - Perfect queue: {extra.sum():.4e} s; the top {a.top} (group, ñ) sets: "
          f"{g.extra_queue_s.sum():.4e} s")
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.precision", 3):
        print(g.drop(columns=["first", "last"]))


if __name__ == "__main__":
    main()
