"""Decision time of the coflow network policies: 100 concurrent coflows on 128 servers.

Builds a cluster state with ``--coflows`` running PS jobs (workers = 2 x a GPU count
drawn from the Microsoft 60-job mix {1: 30, 2: 10, 4: 10, 8: 10}, as many PSs, every
task on its own random server of 128) each with one active all-to-all coflow of
random size and random progress, then times ``policy.decide(view)`` (read the
active coflows, compute every flow's rate, build the SetFlowRates) ``--reps``
times per policy, the straightforward code (``fast_path: false``) and the default fast
path interleaved rep by rep so both see the same machine load. Goal (issue 6): Parrot p50 <= 1 ms.

    PYTHONPATH=. python scripts/bench_parrot.py [--coflows 100] [--reps 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


CASES = [
    ("parrot", {}, "parrot (default: global factor + residual max-min fill)"),
    ("parrot", {"fill_residual": False}, "parrot, paper rule (Alg. 1 S10: one global factor)"),
    ("parrot", {"fill_residual": False, "fill_order": "lpcas"}, "parrot, fill_order lpcas (greedy, no max-min)"),
    ("parrot", {"fill_order": "lpcas"}, "parrot, fill_order lpcas + max-min"),
    ("parrot-wo-wc", {}, "parrot-wo-wc (Alg. 1 S1-9)"),
    ("aalo", {}, "aalo (greedy + max-min)"),
    ("aalo", {"fill_residual": False}, "aalo, greedy only"),
    ("lccf", {}, "lccf (greedy + max-min)"),
]


def bench(pols: list, st: ClusterState, reps: int) -> list[np.ndarray]:
    """Decision times (s) of each policy in ``pols``, interleaved rep by rep (same load for all)."""
    view = st.view()
    out = [[] for _ in pols]
    cpu = [[] for _ in pols]
    for r in range(reps):
        for k, pol in enumerate(pols):
            pol._last_sig = None  # force a recomputation every time
            c0, t0 = time.thread_time(), time.perf_counter()
            d = pol.decide(view)
            out[k].append(time.perf_counter() - t0)
            cpu[k].append(time.thread_time() - c0)
            assert d and len(d[0].rates) > 0
    return [np.array(x) for x in out], [np.array(x) for x in cpu]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coflows", type=int, default=100)
    ap.add_argument("--servers", type=int, default=128)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    st, n_flows = state(a.coflows, a.servers, a.seed)
    print(f"{a.coflows} concurrent coflows, {n_flows} flows, {a.servers} servers, {a.reps} decisions each; "
          f"before = fast_path: false (straightforward code), after = default fast path, interleaved")
    print("wall = perf_counter, cpu = this thread's CPU time (less sensitive to other processes on a loaded host)")
    print("| policy | before p50 ms (wall / cpu) | after p50 ms (wall / cpu) | after p99 ms wall | "
          "before / after (wall / cpu) | after p50 cpu / 1 ms goal |")
    print("|---|---|---|---|---|---|")
    for name, kw, label in CASES:
        slow = make_policy(name, "network", fast_path=False, **kw)
        fast = make_policy(name, "network", **kw)
        (t_slow, t_fast), (c_slow, c_fast) = bench([slow, fast], st, a.reps)
        b50, f50, f99 = np.median(t_slow), np.median(t_fast), np.percentile(t_fast, 99)
        cb, cf = np.median(c_slow), np.median(c_fast)
        print(f"| {label} | {b50 * 1e3:.2f} / {cb * 1e3:.2f} | {f50 * 1e3:.2f} / {cf * 1e3:.2f} | {f99 * 1e3:.2f} | "
              f"{b50 / f50:.2f} / {cb / cf:.2f} | {cf / 1e-3:.2f} |", flush=True)
    print("\nbreakdown of the fast path, p50 cpu ms: read the active coflows (FlowTable) | compute_rates | "
          "emit (flow id -> rate dict)")
    view = st.view()
    for name, kw, label in CASES[:3]:
        pol = make_policy(name, "network", **kw)
        links = pol._table.links(view.cluster)
        t_read, t_comp, t_emit = [], [], []
        for _ in range(a.reps):
            c0 = time.thread_time()
            flows = pol._table.read(view)
            c1 = time.thread_time()
            rates = pol.compute_rates(flows, links, view)
            c2 = time.thread_time()
            dict(zip(flows.flow_ids, rates.tolist()))
            c3 = time.thread_time()
            t_read.append(c1 - c0)
            t_comp.append(c2 - c1)
            t_emit.append(c3 - c2)
        print(f"  {label}: {np.median(t_read) * 1e3:.2f} | {np.median(t_comp) * 1e3:.2f} | "
              f"{np.median(t_emit) * 1e3:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
