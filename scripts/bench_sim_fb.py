"""Wall time of the flow simulator on the Facebook coflow benchmark, before vs after, with equal results.

Runs the ``fb`` instance of ``scripts/reproduce_parrot.py`` (FB2010 coflows as single-coflow
jobs on 150 servers at 10 Gbit/s, FIFO with random placement + a coflow network policy at
its defaults, seed 1) for each scheme, once with this checkout (*after*) and, with
``--before-rev REV``, once with revision REV (its code extracted by ``git archive`` into a
temporary folder; *before*), one after the other per scheme so both see the same host load.
Each run is its own process (``--one``), so the two revisions' modules never mix. Prints the
wall time of ``Simulator.run`` (seconds), the event count, the total JCT (s) and the largest
relative difference of any job's finish time between before and after (0 = identical).

    PYTHONPATH=. python scripts/bench_sim_fb.py [--limit 250] [--arrival-scale 1] \
        [--schemes parrot,aalo,lccf] [--before-rev 30c3701]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(limit: int, arrival_scale: float, scheme: str, gbps: float = 10.0) -> dict:
    """Simulate the instance with the ``raytestbed`` on ``sys.path``; wall seconds and finish times."""
    from raytestbed.config import ClusterConfig, ServerGroup
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator
    from raytestbed.traces.registry import load_workload

    cl = ClusterConfig(name=f"parrot_150_{gbps:g}g", nic_gbps=gbps, intra_gbytes_per_s=300,
                       servers=[ServerGroup(count=150, gpus=8)]).build()
    jobs = load_workload("fb_coflow", {"limit": limit, "arrival_scale": arrival_scale}, cl, 1, ROOT)
    fifo = make_policy("fifo", "placement", 1, spread="random")
    net = make_policy(scheme, "network", 1)
    t0 = time.perf_counter()
    res = Simulator(cl, jobs, fifo, net, mode="flow").run()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "events": res.events,
            "finish": [r.finish_s for r in res.records],
            "total_jct_s": sum(r.finish_s - r.job.arrival_s for r in res.records)}


def spawn(code_root: Path, limit: int, arrival_scale: float, scheme: str) -> dict:
    """``run_one`` in a fresh process that imports ``raytestbed`` from ``code_root``."""
    from raytestbed.traces.datadir import find_data_dir as data_dir

    env = {**os.environ, "PYTHONPATH": str(code_root), "PYTHONDONTWRITEBYTECODE": "1"}
    if data_dir() is not None:  # an extracted revision finds no shared/data above it
        env["RAYTESTBED_DATA_DIR"] = str(data_dir())
    out = subprocess.run([sys.executable, __file__, "--one", "--limit", str(limit), "--arrival-scale",
                          str(arrival_scale), "--schemes", scheme], env=env, check=True,
                         capture_output=True, text=True, cwd=code_root).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=250, help="first N coflows of the trace (526 in all)")
    ap.add_argument("--arrival-scale", type=float, default=1.0, help="factor on the trace's arrival times")
    ap.add_argument("--schemes", default="parrot,aalo,lccf")
    ap.add_argument("--before-rev", default=None, help="git revision to time beside this checkout")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child: one run, JSON on stdout
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_one(a.limit, a.arrival_scale, a.schemes)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        before_root = None
        if a.before_rev:
            before_root = Path(tmp)
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.before_rev], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        print(f"fb, first {a.limit} coflows, arrival scale {a.arrival_scale:g}; wall = Simulator.run, seconds")
        for scheme in a.schemes.split(","):
            after = spawn(ROOT, a.limit, a.arrival_scale, scheme)
            line = f"{scheme:8s} after {after['wall_s']:8.1f} s ({after['events']} events, " \
                   f"total JCT {after['total_jct_s']:.6f} s)"
            if before_root is not None:
                before = spawn(before_root, a.limit, a.arrival_scale, scheme)
                diff = max((abs(x - y) / abs(x) if x else abs(y)
                            for x, y in zip(before["finish"], after["finish"])), default=0.0)
                line += (f"  before {before['wall_s']:8.1f} s  before/after "
                         f"{before['wall_s'] / after['wall_s']:6.1f}x  max rel. diff of finish times {diff:.3g}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
