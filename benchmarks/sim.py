"""Benchmark: simulate FIFO on the A-SRPT 250 x 8 cluster with 150,000 synthetic jobs.

Prints jobs/s of the whole run (workload generation excluded and reported
separately) and the decision-time percentiles. Run:

    raytestbed bench sim [--jobs 150000] [--policy fifo] [--param KEY=VALUE ...] [--history N]
                         [--forest exact|sklearn|both] [--trial TRIAL [--set KEY=VALUE ...]]

``--trial``: the cluster, jobs and predictor history of a trial file instead (``--set``: dotted
overrides, e.g. ``--set workload.jobs=75000``); ``--jobs`` and ``--history`` then do not apply.

``--forest`` picks how the A-SRPT family's random forest is fitted
(``RandomForestPredictor.engine``): ``exact`` (default, :mod:`raytestbed.predict.forest`),
``sklearn`` (scikit-learn on every row), or ``both``: the same jobs simulated twice in this
process, scikit-learn first, with the CPU seconds of each, their ratio and whether the
per-job results (start, finish, placement, prediction of every job) are identical.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
import yaml

from raytestbed.resources import package_dir, package_root
from raytestbed.config import load_cluster
from raytestbed.core.profile import default_profiles
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import WorkloadContext
from raytestbed.traces.synthetic import synthetic_workload



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=150_000)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--cluster", default=str(package_dir("clusters") / "asrpt_sim_250x8.yaml"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="policy parameter (YAML value), e.g. --param tau=1 --param predictor=rf; repeatable")
    ap.add_argument("--history", type=int, default=0,
                    help="draw this many extra jobs from the same recurring groups and pass their "
                         "(group, user, iterations) to the policy as predictor history (A-SRPT family)")
    ap.add_argument("--forest", choices=("exact", "sklearn", "both"), default="exact",
                    help="random-forest fit of the predicting policies (both: run twice and compare)")
    ap.add_argument("--trial", help="the cluster, jobs and predictor history of this trial file (a path or a "
                    "shipped trial's name) instead of the synthetic workload")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="with --trial: a dotted override of the trial (YAML value), e.g. workload.jobs=75000")
    args = ap.parse_args(argv)
    params = _pairs(ap, args.param, "--param")
    if args.set and not args.trial:
        ap.error("--set needs --trial")
    if args.trial:
        return _report(args, params, *_trial_jobs(args.trial, _pairs(ap, args.set, "--set"), args.seed))

    cluster = load_cluster(args.cluster).build()
    c0 = time.process_time()
    t0 = time.perf_counter()
    ctx = WorkloadContext(cluster, args.seed, package_root(), default_profiles())
    # Trace-like mix: ~70% single-GPU jobs (A-SRPT §V-B-2-b); load close to the cluster's capacity.
    jobs = synthetic_workload({
        "jobs": args.jobs + args.history, "mean_interarrival_s": 30.0, "groups": 2000, "users": 300,
        "gpu_mix": {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.07, 16: 0.03},
        "iterations": [100, 20000],
    }, ctx)
    t_gen = time.perf_counter() - t0
    cpu_gen = time.process_time() - c0
    # the extra draws come from the same groups (same seed): an i.i.d. history, never simulated
    jobs, extra = jobs[: args.jobs], jobs[args.jobs:]
    return _report(args, params, cluster, jobs, [(j.group, j.user, j.iterations) for j in extra], t_gen, cpu_gen)


def _pairs(ap, items: list[str], flag: str) -> dict:
    out = {}
    for kv in items:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"{flag} {kv!r}: expected KEY=VALUE")
        out[k] = yaml.safe_load(v)
    return out


def _trial_jobs(path: str, sets: dict, seed: int):
    """(cluster, jobs, history rows, generation s wall, generation s CPU) of a trial's workload."""
    from raytestbed.experiments.spec import trial_with
    from raytestbed.traces.registry import load_workload

    c0 = time.process_time()
    t0 = time.perf_counter()
    loaded = trial_with(path, sets)
    cluster = loaded.cluster_config.build()
    wl = loaded.trial.workload.model_dump()
    jobs = load_workload(wl.pop("kind"), wl, cluster, seed, loaded.base_dir)
    history = list(getattr(jobs, "predictor_history", []))
    return cluster, list(jobs), history, time.perf_counter() - t0, time.process_time() - c0


def _report(args, params: dict, cluster, jobs, history: list, t_gen: float, cpu_gen: float) -> int:
    """Simulate ``jobs`` (once, or twice with ``--forest both``) and print the report; the exit status."""
    if history:
        params["history"] = history
    runs = {}
    for engine in (("sklearn", "exact") if args.forest == "both" else (args.forest,)):
        runs[engine] = _simulate(cluster, jobs, args.policy, args.seed, params, engine)
    t_fit, t_sim, cpu_sim, res, digest = runs[engine]
    cpu = cpu_gen + cpu_sim  # workload generation + the run shown (the exact one with --forest both)
    dt = res.decision_times_s
    fin = sum(1 for r in res.records if r.finish_s == r.finish_s)
    print(f"cluster        {cluster.name}: {cluster.num_servers} servers, {cluster.total_gpus} GPUs")
    shown = {k: v for k, v in params.items() if k != "history"}
    print(f"policy         {args.policy} {shown}" + (f" history={len(history):,} jobs" if history else ""))
    print(f"policy init    {t_fit:.2f} s (predictor fit on the history, if any)")
    print(f"jobs           {len(jobs)} generated in {t_gen:.2f} s, {fin} finished")
    print(f"events         {res.events}")
    print(f"simulation     {t_sim:.2f} s wall  ->  {len(jobs) / t_sim:,.0f} jobs/s ({engine} forest)")
    print(f"decision time  p50 {np.percentile(dt, 50) * 1e6:.1f} us, p99 {np.percentile(dt, 99) * 1e6:.1f} us "
          f"over {dt.size} calls")
    if len(runs) == 2:
        (_, _, c_ref, _, h_ref), (_, _, c_new, _, h_new) = runs["sklearn"], runs["exact"]
        print(f"forest fit     sklearn {c_ref:.2f} s CPU, exact {c_new:.2f} s CPU (policy init + simulation) "
              f"-> ratio {c_ref / c_new:.2f}; per-job results {'identical' if h_ref == h_new else 'DIFFERENT'} "
              f"(sha256 {h_new[:16]})")
    else:
        print(f"per-job digest sha256 {digest[:16]} (start, finish, placement, prediction of every job)")
    print(f"whole run      {t_gen + t_fit + t_sim:.2f} s wall, {cpu:.2f} s CPU (generation + this run; goal <= 60 s)")
    return 0 if len(runs) == 1 or runs["sklearn"][4] == runs["exact"][4] else 1


def _simulate(cluster, jobs, policy_name, seed, params, engine):
    """One simulation with the forest fitted by ``engine``: (init s, simulation s wall, CPU s, result, digest)."""
    from raytestbed.predict.iterations import RandomForestPredictor

    before = RandomForestPredictor.engine
    RandomForestPredictor.engine = engine
    try:
        c0 = time.process_time()
        t2 = time.perf_counter()
        policy = make_policy(policy_name, seed=seed, **params)
        t_fit = time.perf_counter() - t2
        t1 = time.perf_counter()
        res = Simulator(cluster, jobs, policy).run()
        t_sim = time.perf_counter() - t1
        cpu = time.process_time() - c0
    finally:
        RandomForestPredictor.engine = before
    rows = sorted((r.job.job_id, r.first_start_s, r.finish_s, r.placement, r.predicted_iterations)
                  for r in res.records)
    return t_fit, t_sim, cpu, res, hashlib.sha256(repr(rows).encode()).hexdigest()
