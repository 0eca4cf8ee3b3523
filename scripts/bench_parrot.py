"""Decision time of the coflow network policies: 100 concurrent coflows on 128 servers.

Builds a cluster state with ``--coflows`` running PS jobs (workers = 2 x a GPU count
drawn from the Microsoft 60-job mix {1: 30, 2: 10, 4: 10, 8: 10}, as many PSs, every
task on its own random server of 128) each with one active all-to-all coflow of
random size and random progress, then times ``policy.decide(view)`` (read the
active coflows, compute every flow's rate, build the SetFlowRates) ``--reps``
times per policy. Goal (issue 6): Parrot p50 <= 1 ms.

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


def bench(name: str, st: ClusterState, reps: int) -> np.ndarray:
    pol = make_policy(name, "network")
    view = st.view()
    out = []
    for r in range(reps):
        pol._last_sig = None  # force a recomputation every time
        t0 = time.perf_counter()
        d = pol.decide(view)
        out.append(time.perf_counter() - t0)
        assert d and len(d[0].rates) > 0
    return np.array(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coflows", type=int, default=100)
    ap.add_argument("--servers", type=int, default=128)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    st, n_flows = state(a.coflows, a.servers, a.seed)
    print(f"{a.coflows} concurrent coflows, {n_flows} flows, {a.servers} servers, {a.reps} decisions each")
    print(f"{'policy':14s} {'p50 ms':>8s} {'p99 ms':>8s} {'p50 / 1 ms goal':>16s} {'p50 / parrot':>13s}")
    res = {}
    for name in ("parrot", "parrot-wo-wc", "aalo", "lccf"):
        res[name] = bench(name, st, a.reps)
    base = np.median(res["parrot"])
    for name, t in res.items():
        p50, p99 = np.median(t), np.percentile(t, 99)
        print(f"{name:14s} {p50 * 1e3:8.3f} {p99 * 1e3:8.3f} {p50 / 1e-3:16.2f} {p50 / base:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
