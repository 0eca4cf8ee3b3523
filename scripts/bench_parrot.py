"""Decision time of the coflow network policies: 100 concurrent coflows on 128 servers.

Builds a cluster state with ``--coflows`` running PS jobs (workers = 2 x a GPU count
drawn from the Microsoft 60-job mix {1: 30, 2: 10, 4: 10, 8: 10}, as many PSs, every
task on its own random server of 128) each with one active all-to-all coflow of
random size and random progress, then times ``policy.decide(view)`` (read the
active coflows, compute every flow's rate, build the SetFlowRates) ``--reps``
times per policy, *before* and *after* interleaved rep by rep so both see the same
machine load. *After* = this checkout's default path. *Before* = the same policy
from git revision ``--before-rev`` (its code extracted with ``git archive`` into a
temporary folder and imported beside this checkout's), or with ``--before-rev
reference`` this checkout's reference code (``fast_path: false``). Prints p50 / p99
of wall and CPU time (this thread's), the ratio before / after, and for *after*
the rate computation alone (``compute_rates``) and the read / compute / emit split.
Goal (issue 6): rate computation p50 <= 1 ms.

    PYTHONPATH=. python scripts/bench_parrot.py [--coflows 100] [--reps 200] [--before-rev c9797f1]
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytestbed.core.cluster import Cluster  # noqa: E402
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile  # noqa: E402
from raytestbed.core.placement import Placement  # noqa: E402
from raytestbed.core.state import ClusterState, CoflowInfo, FlowInfo, RunningJob  # noqa: E402
from raytestbed.schedulers.base import make_policy  # noqa: E402


def state(n_coflows: int, servers: int, seed: int) -> tuple[ClusterState, int]:
    rng = np.random.default_rng(seed)
    cl = Cluster.homogeneous(servers, 8, 1.25e9, 3e11)
    st = ClusterState(cl)
    n_flows = 0
    for k in range(n_coflows):
        w = 2 * int(rng.choice([1, 2, 4, 8], p=[0.5, 1 / 6, 1 / 6, 1 / 6]))
        srv = rng.choice(servers, size=2 * w, replace=False)
        workers, ps = srv[:w], srv[w:]
        job = Job(k, float(k), 100, (Stage(w, StageProfile(0.0, 0.0)),), CommPattern.PS, num_ps=w)
        place = Placement((tuple(int(m) * 8 for m in workers),), tuple(int(m) for m in ps))
        st.running[k] = RunningJob(job, place, 0.0, 0.0, bytes_sent=float(rng.uniform(0, 1e10)),
                                   coflows_done=int(rng.integers(0, 50)))
        L = float(rng.uniform(1e7, 1e9))
        fl = []
        for i, (a, b) in enumerate((int(x), int(y)) for x in workers for y in ps):
            v = float(rng.uniform(0, L)) + 1.0
            fl.append(FlowInfo((k, 0, 0, i), a, b, v, v * float(rng.uniform(0.05, 1.0))))
        st.coflows[(k, 0, 0)] = CoflowInfo((k, 0, 0), k, 0.0, tuple(fl))
        n_flows += len(fl)
    return st, n_flows


# every case names its fill parameters explicitly, so "before" revisions with other defaults time the same variant
CASES = [
    ("parrot", {"fill_order": "none", "fill_residual": True},
     "parrot, global factor + residual max-min fill (the default before 2026-11-24)"),
    ("parrot", {"fill_order": "none", "fill_residual": False}, "parrot, paper rule (Alg. 1 S10: one global factor)"),
    ("parrot", {"fill_order": "lpcas", "fill_residual": False},
     "parrot, S10 per coflow in LPCAS order (`fill_order: lpcas`, no max-min; default)"),
    ("parrot", {"fill_order": "lpcas", "fill_residual": True}, "parrot, fill_order lpcas + max-min"),
    ("parrot-wo-wc", {}, "parrot-wo-wc (Alg. 1 S1-9)"),
    ("aalo", {"fill_residual": True}, "aalo (greedy + max-min)"),
    ("aalo", {"fill_residual": False}, "aalo, greedy only (default)"),
    ("lccf", {"fill_residual": True}, "lccf (greedy + max-min)"),
]


def policy_maker(rev: str):
    """``make_policy`` of git revision ``rev`` of this repository (its ``raytestbed`` imported from a
    temporary ``git archive`` copy, then moved aside so this checkout's modules stay in place), or
    this checkout's reference code for ``rev == "reference"``."""
    if rev == "reference":
        return lambda name, **kw: make_policy(name, "network", fast_path=False, **kw)
    tmp = tempfile.mkdtemp(prefix="bench_parrot_")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "raytestbed"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    ours = {k: m for k, m in sys.modules.items() if k == "raytestbed" or k.startswith("raytestbed.")}
    for k in ours:
        del sys.modules[k]
    sys.path.insert(0, tmp)
    try:
        base = importlib.import_module("raytestbed.schedulers.base")
        base.available_policies()  # imports every policy module of that revision now
    finally:
        sys.path.remove(tmp)
        for k in [k for k in sys.modules if k == "raytestbed" or k.startswith("raytestbed.")]:
            del sys.modules[k]
        sys.modules.update(ours)
    return lambda name, **kw: base.make_policy(name, "network", **kw)


def bench(pols: list, st: ClusterState, reps: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Wall and CPU decision times (s) of each policy in ``pols``, interleaved rep by rep (same load for all)."""
    view = st.view()
    wall = [[] for _ in pols]
    cpu = [[] for _ in pols]
    for r in range(reps):
        for k, pol in enumerate(pols):
            pol._last_sig = None  # force a recomputation every time
            c0, t0 = time.thread_time(), time.perf_counter()
            d = pol.decide(view)
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.thread_time() - c0)
            assert d and len(d[0].rates) > 0
    return [np.array(x) for x in wall], [np.array(x) for x in cpu]


def split(pol, st: ClusterState, reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CPU seconds of the three parts of a decision: read the active coflows, ``compute_rates``, emit."""
    view = st.view()
    links = pol._table.links(view.cluster)
    t = np.zeros((3, reps))
    for r in range(reps):
        c0 = time.thread_time()
        flows = pol._table.read(view)
        c1 = time.thread_time()
        rates = pol.compute_rates(flows, links, view)
        c2 = time.thread_time()
        dict(zip(flows.flow_ids, rates.tolist()))
        t[:, r] = c1 - c0, c2 - c1, time.thread_time() - c2
    return t[0], t[1], t[2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coflows", type=int, default=100)
    ap.add_argument("--servers", type=int, default=128)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--before-rev", default="c9797f1",
                    help="git revision timed as 'before' (default c9797f1), or 'reference' (fast_path: false)")
    a = ap.parse_args(argv)
    st, n_flows = state(a.coflows, a.servers, a.seed)
    make_before = policy_maker(a.before_rev)
    ms = (lambda x, q=50: np.percentile(x, q) * 1e3)
    print(f"{a.coflows} concurrent coflows, {n_flows} flows, {a.servers} servers, {a.reps} decisions each; "
          f"before = {a.before_rev}, after = this checkout's default path, interleaved")
    print("whole decide(view), ms: wall = perf_counter, cpu = this thread's CPU time (less sensitive to other "
          "processes on a loaded host); rate computation = compute_rates alone (after)")
    print("| policy | decide: before p50 wall / cpu | after p50 wall / cpu | after p99 wall / cpu | before / after "
          "p50 cpu | rate computation: before p50 cpu | after p50 / p99 cpu | before / after p50 | after: read / "
          "compute / emit p50 cpu |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, kw, label in CASES:
        before = make_before(name, **kw)
        after = make_policy(name, "network", **kw)
        (w0, w1), (c0, c1) = bench([before, after], st, a.reps)
        comp0 = split(before, st, a.reps)[1]
        rd, comp, em = split(after, st, a.reps)
        print(f"| {label} | {ms(w0):.2f} / {ms(c0):.2f} | {ms(w1):.2f} / {ms(c1):.2f} | {ms(w1, 99):.2f} / "
              f"{ms(c1, 99):.2f} | {ms(c0) / ms(c1):.2f} | {ms(comp0):.2f} | {ms(comp):.2f} / {ms(comp, 99):.2f} | "
              f"{ms(comp0) / ms(comp):.2f} | {ms(rd):.2f} / {ms(comp):.2f} / {ms(em):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
