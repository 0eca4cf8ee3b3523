"""Wall time of the flow simulator on the Facebook coflow benchmark, before vs after, with equal results.

Runs FB2010 coflows (``fb_coflow``: every coflow a one-iteration job) on 150 servers at
``--gbps`` Gbit/s per port, FIFO with random placement + a network policy at its defaults (seed
1) for each scheme, once with this checkout (*after*) and, with ``--before-rev REV``, once with
revision REV (its code extracted by ``git archive`` into a temporary folder; *before*), one after
the other per scheme so both see the same host load. Each run is its own process (``--one``), so
the two revisions' modules never mix; a *before* run still going after ``--before-timeout``
seconds is stopped and shown as "> T s". Prints the wall and CPU seconds of building and running
the ``Simulator`` (CPU seconds are less sensitive to other load on a shared host), the policy event
count, the average JCT (= CCT here, s) and the largest relative difference of any job's finish
time between before and after (0 = identical).

The child runs this file as a script with ``PYTHONPATH`` set to the code under test, so this
module imports nothing from ``raytestbed`` at its top (an older revision has no such module).

The issue's setting (sizes in MiB, CoflowSim's 1.048576 Gbit/s ports, all 526 coflows):

    raytestbed bench sim-fb --limit 526 --mb-bytes 1048576 --gbps 1.048576 \
        --schemes fair,aalo,varys,parrot --before-rev 81a7cca --before-timeout 600

(``scripts/bench_sim_fb.py`` takes the same options.)
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

#: the checkout this benchmark is in (the child's code; the git archive's source)
ROOT = Path(__file__).resolve().parents[1]
#: the child runs this file as __main__ with the current folder (the code under test) first on sys.path,
#: not this file's folder (``python FILE`` would put the benchmarks folder there)
_CHILD = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def run_one(limit: int, arrival_scale: float, scheme: str, gbps: float = 10.0, mb_bytes: float = 1e6) -> dict:
    """Simulate the instance with the ``raytestbed`` on ``sys.path``; wall/CPU seconds and finish times."""
    from raytestbed.config import ClusterConfig, ServerGroup
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator
    from raytestbed.traces.registry import load_workload

    cl = ClusterConfig(name=f"parrot_150_{gbps:g}g", nic_gbps=gbps, intra_gbytes_per_s=300,
                       servers=[ServerGroup(count=150, gpus=8)]).build()
    jobs = load_workload("fb_coflow", {"limit": limit, "arrival_scale": arrival_scale, "mb_bytes": mb_bytes},
                         cl, 1, Path.cwd())
    fifo = make_policy("fifo", "placement", 1, spread="random")
    net = make_policy(scheme, "network", 1)
    t0, c0 = time.perf_counter(), time.process_time()
    res = Simulator(cl, jobs, fifo, net, mode="flow").run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    total = sum(r.finish_s - r.job.arrival_s for r in res.records)
    return {"wall_s": wall, "cpu_s": cpu, "events": res.events,
            "finish": [r.finish_s for r in res.records],
            "total_jct_s": total, "avg_jct_s": total / len(res.records)}


def spawn(code_root: Path, a: argparse.Namespace, scheme: str, timeout: float | None = None) -> dict | None:
    """``run_one`` in a fresh process that imports ``raytestbed`` from ``code_root`` (None: timed out)."""
    from raytestbed.traces.datadir import find_data_dir as data_dir

    env = {**os.environ, "PYTHONPATH": str(code_root), "PYTHONDONTWRITEBYTECODE": "1"}
    fb = data_dir(rel="coflow-fb2010/FB2010-1Hr-150-0.txt")
    if fb is not None:  # an extracted revision may find no data folder
        env["RAYTESTBED_DATA_DIR"] = str(fb)
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, __file__, "--one", "--limit", str(a.limit), "--arrival-scale",
                              str(a.arrival_scale), "--schemes", scheme, "--gbps", str(a.gbps),
                              "--mb-bytes", str(a.mb_bytes)], env=env, check=True,
                             capture_output=True, text=True, cwd=code_root, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as e:  # e.g. a policy that revision does not have
        return {"error": (e.stderr or "").strip().splitlines()[-1] if e.stderr else f"exit {e.returncode}"}
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=250, help="first N coflows of the trace (526 in all)")
    ap.add_argument("--arrival-scale", type=float, default=1.0, help="factor on the trace's arrival times")
    ap.add_argument("--schemes", default="parrot,aalo,lccf")
    ap.add_argument("--gbps", type=float, default=10.0, help="port rate, Gbit/s")
    ap.add_argument("--mb-bytes", type=float, default=1e6, help="bytes per trace MB (1048576: MiB, as CoflowSim)")
    ap.add_argument("--before-rev", default=None, help="git revision to time beside this checkout")
    ap.add_argument("--before-timeout", type=float, default=None, help="stop a before run after this many seconds")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child: one run, JSON on stdout
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.limit, a.arrival_scale, a.schemes, a.gbps, a.mb_bytes)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        before_root = None
        if a.before_rev:
            before_root = Path(tmp)
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.before_rev], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        print(f"fb, first {a.limit} coflows, {a.gbps:g} Gbit/s ports, MB = {a.mb_bytes:g} bytes, arrival scale "
              f"{a.arrival_scale:g}; seconds of Simulator construction + run")
        for scheme in a.schemes.split(","):
            after = spawn(ROOT, a, scheme)
            if "error" in after:
                print(f"{scheme:8s} after failed: {after['error']}", flush=True)
                continue
            line = (f"{scheme:8s} after wall {after['wall_s']:7.1f} s cpu {after['cpu_s']:7.1f} s "
                    f"({after['events']} events, avg JCT {after['avg_jct_s']:.6f} s)")
            if before_root is not None:
                before = spawn(before_root, a, scheme, a.before_timeout)
                if before is not None and "error" in before:
                    line += f"  before: failed ({before['error'][:80]})"
                elif before is None:
                    line += (f"  before > {a.before_timeout:.0f} s wall (stopped)  before/after "
                             f"> {a.before_timeout / after['wall_s']:.1f}x wall")
                else:
                    diff = max((abs(x - y) / abs(x) if x else abs(y)
                                for x, y in zip(before["finish"], after["finish"])), default=0.0)
                    line += (f"  before wall {before['wall_s']:7.1f} s cpu {before.get('cpu_s', float('nan')):7.1f} s"
                             f"  before/after {before['wall_s'] / after['wall_s']:6.1f}x wall "
                             f"{before.get('cpu_s', float('nan')) / after['cpu_s']:6.1f}x cpu"
                             f"  max rel. diff of finish times {diff:.3g}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":  # the child of spawn(): one run, JSON on stdout
    sys.exit(main())
