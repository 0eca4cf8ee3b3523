"""Cross-check of Gavel's policies against Gavel's own simulator, on the same Gavel-format traces.

Runs our simulator (``workload.kind: gavel``, analytic timing, the Gavel throughput data set) on each
trace for each policy, on Gavel's simulated cluster (default 36 V100 + 36 P100 + 36 K80, one GPU per
server as Gavel's driver sets them up), and prints per (trace, policy): the average JCT of the jobs in
the measurement window (``--window START:END``, job ids = trace line numbers from 0, END excluded), the
wall and CPU seconds of the run (reading the trace included). Both simulators run the whole trace and
the window is taken from their per-job JCTs: Gavel's driver's own window (``-s/-e``) never advances its
clock past the first arrival when it reads a trace (its main loop reads the next arrival only when no
window is set).

With ``--gavel DIR`` (a checkout of Gavel's repository, stanford-futuredata/gavel, or its ``scheduler/``
folder, with its RPC stubs generated: ``make rpc_stubs`` there) it also runs Gavel's driver
``scripts/drivers/simulate_scheduler_with_trace.py`` on the same trace with ``--gavel-python`` (an
interpreter that has Gavel's requirements: cvxpy, ECOS, matrix_completion, grpcio ...), and prints its
average JCT over the window jobs both finished, the jobs Gavel dropped in the whole trace (its ``[Job
failed]``: a job with fewer steps left than workers, after 5 failed rounds), its wall and CPU seconds (the whole
process: Python start-up and imports included), and the ratios ours / Gavel's. ``--gaps N`` lists the
N window jobs with the largest JCT differences per pair; ``--out DIR`` keeps per-job JCTs (CSV) and
Gavel's logs.

Policy names are Gavel's; ours are the same except ``fifo``, which is ``fifo_gavel`` here (see
``POLICIES``).

    raytestbed bench gavel --trace gavel_rate4.trace --trace gavel_rate8.trace --window 300:600 \\
        --gavel GAVEL_CHECKOUT --gavel-python GAVEL_VENV/bin/python --out OUT/gavel --gaps 8

(traces from Gavel's ``scripts/utils/generate_trace.py``; results and setting: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import csv
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.errors import RaytestbedError
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload

#: Gavel's policy name -> ours
POLICIES = {
    "fifo": "fifo_gavel",
    "fifo_perf": "fifo_perf",
    "max_min_fairness": "max_min_fairness",
    "max_min_fairness_perf": "max_min_fairness_perf",
    "finish_time_fairness_perf": "finish_time_fairness_perf",
}
TYPES = ("v100", "p100", "k80")  #: the order of Gavel's ``-c V100:P100:K80``
GB = 1e9


def gavel_cluster(counts: tuple[int, int, int]) -> Cluster:
    """Gavel's simulated cluster: ``counts`` GPUs of V100, P100, K80, one GPU per server."""
    servers, sid = [], 0
    for t, n in zip(TYPES, counts):
        for _ in range(n):
            servers.append(Server(sid, 1, GB, GB, gpu_type=t))
            sid += 1
    return Cluster(tuple(servers), 100 * GB)


def run_ours(trace: Path, policy: str, counts: tuple[int, int, int], window: tuple[int, int] | None,
             seed: int = 0, round_s: float = 360.0, throughputs: str = "gavel"
             ) -> tuple[dict[int, float], float, float]:
    """Our run of the whole trace: ({job id: JCT s} of the window jobs that finished, wall s, CPU s).
    ``throughputs``: the table (a data set name or a path), Gavel's ``simulation_throughputs.json`` by default."""
    t0, c0 = time.perf_counter(), time.process_time()
    cl = gavel_cluster(counts)
    jobs = load_workload("gavel", {"path": str(trace.resolve()), "throughputs": throughputs}, cl, seed, trace.parent)
    lo, hi = window if window else (0, len(jobs))
    if not 0 <= lo < hi <= len(jobs):
        raise ValueError(f"--window {lo}:{hi} is outside the trace's {len(jobs)} jobs")
    pol = make_policy(POLICIES.get(policy, policy), "placement", seed, round_s=round_s)
    res = Simulator(cl, jobs, pol, speeds=GpuSpeeds(cl, jobs.throughputs)).run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    jct = {r.job.job_id: r.finish_s - r.job.arrival_s for r in res.records
           if lo <= r.job.job_id < hi and np.isfinite(r.finish_s)}
    return jct, wall, cpu


JOB_LINE = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.]+)$")


def run_gavel(gavel: Path, python: str, trace: Path, policy: str, counts: tuple[int, int, int],
              window: tuple[int, int] | None, seed: int = 0, round_s: float = 360.0, solver: str = "ECOS",
              log: Path | None = None) -> tuple[dict[int, float], int, float, float]:
    """Gavel's run: ({job id: JCT s} of the window jobs it finished, jobs it dropped, wall s, CPU s of
    the child process)."""
    sched = gavel / "scheduler" if (gavel / "scheduler").is_dir() else gavel
    driver = sched / "scripts" / "drivers" / "simulate_scheduler_with_trace.py"
    if not driver.is_file():
        raise FileNotFoundError(f"--gavel {gavel}: no scripts/drivers/simulate_scheduler_with_trace.py (a checkout of "
                                f"stanford-futuredata/gavel, or its scheduler/ folder)")
    cmd = [python, str(driver), "-t", str(trace.resolve()), "-p", policy, "-c", ":".join(map(str, counts)),
           "--seed", str(seed), "--time_per_iteration", str(int(round_s)), "--solver", solver]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=sched, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if log is not None:
        log.write_text(p.stdout + "\n# stderr\n" + p.stderr)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"Gavel's simulator, {policy} on {trace.name}: exit {p.returncode}: {tail}")
    lo, hi = window if window else (0, 1 << 62)
    jct = {}
    for line in p.stdout.splitlines():
        m = JOB_LINE.match(line.strip())
        if m and lo <= int(m.group(1)) < hi:
            jct[int(m.group(1))] = float(m.group(2))
    dropped = p.stderr.count("[Job failed]")
    return jct, dropped, wall, cpu


def _counts(text: str) -> tuple[int, int, int]:
    parts = text.split(":")
    if len(parts) != 3 or not all(x.isdigit() for x in parts):
        raise argparse.ArgumentTypeError(f"--cluster {text!r}: want V100:P100:K80 GPU counts, e.g. 36:36:36")
    return tuple(int(x) for x in parts)  # type: ignore[return-value]


def _window(text: str) -> tuple[int, int]:
    parts = text.split(":")
    if len(parts) != 2 or not all(x.isdigit() for x in parts) or int(parts[0]) >= int(parts[1]):
        raise argparse.ArgumentTypeError(f"--window {text!r}: want START:END job ids, START < END, e.g. 4000:5000")
    return int(parts[0]), int(parts[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench gavel", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, action="append", required=True,
                    help="a trace in Gavel's format (repeat for several)")
    ap.add_argument("--policies", default=",".join(POLICIES), help=f"comma list of Gavel's names ({', '.join(POLICIES)})")
    ap.add_argument("--cluster", type=_counts, default=(36, 36, 36), help="V100:P100:K80 GPU counts (default 36:36:36)")
    ap.add_argument("--window", type=_window, default=None, help="START:END job ids measured (default: every job)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--round-s", type=float, default=360.0, help="round length, seconds (Gavel's 360)")
    ap.add_argument("--throughputs", default="gavel",
                    help="our throughput table: gavel (Gavel's simulation_throughputs.json, the default) or a path")
    ap.add_argument("--gavel", type=Path, default=None, help="Gavel checkout: also run its simulator")
    ap.add_argument("--gavel-python", default="python3", help="interpreter with Gavel's requirements")
    ap.add_argument("--solver", default="ECOS", help="Gavel's cvxpy solver (ECOS, SCS, GUROBI)")
    ap.add_argument("--gaps", type=int, default=0, help="window jobs with the largest JCT gaps to list per pair")
    ap.add_argument("--out", type=Path, default=None, help="folder for per-job JCT CSVs and Gavel's logs")
    a = ap.parse_args(argv)
    policies = [p.strip() for p in a.policies.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        print(f"raytestbed bench gavel: --policies: unknown {', '.join(bad)} (known: {', '.join(POLICIES)})",
              file=sys.stderr)
        return 2
    for t in a.trace:
        if not t.is_file():
            print(f"raytestbed bench gavel: --trace {t}: file not found", file=sys.stderr)
            return 2
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    print("| trace | policy | window jobs | ours avg JCT h | wall s | CPU s | Gavel avg JCT h | dropped | wall s | CPU s "
          "| JCT ours/Gavel | wall ours/Gavel | CPU ours/Gavel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    gaps = []
    for trace in a.trace:
        for pol in policies:
            try:
                ours, w1, c1 = run_ours(trace, pol, a.cluster, a.window, a.seed, a.round_s, a.throughputs)
                if a.gavel is not None:
                    log = a.out / f"gavel_{trace.stem}_{pol}.log" if a.out else None
                    theirs, dropped, w2, c2 = run_gavel(a.gavel, a.gavel_python, trace, pol, a.cluster, a.window,
                                                        a.seed, a.round_s, a.solver, log)
            except (RaytestbedError, ValueError, OSError, RuntimeError) as e:
                print(f"raytestbed bench gavel: {trace}: {pol}: {e}", file=sys.stderr)
                return 2
            if a.gavel is None:
                theirs: dict[int, float] = {}
                cells = ["-"] * 7
                ours_avg, n = float(np.mean(list(ours.values()))) if ours else float("nan"), len(ours)
            else:
                both = sorted(set(ours) & set(theirs))  # jobs both finished (Gavel may drop some)
                n = len(both)
                ours_avg = float(np.mean([ours[j] for j in both])) if both else float("nan")
                g_avg = float(np.mean([theirs[j] for j in both])) if both else float("nan")
                cells = [f"{g_avg / 3600:.3f}", str(dropped), f"{w2:.1f}", f"{c2:.1f}", f"{ours_avg / g_avg:.3f}",
                         f"{w1 / w2:.2f}", f"{c1 / c2:.2f}"]
                if a.gaps:
                    top = sorted(both, key=lambda j: -abs(ours[j] - theirs[j]))[:a.gaps]
                    gaps.append((f"{trace.name} {pol}", [(j, ours[j], theirs[j]) for j in top]))
            print(f"| {trace.name} | {pol} | {n} | {ours_avg / 3600:.3f} | {w1:.1f} | {c1:.1f} | " + " | ".join(cells)
                  + " |", flush=True)
            if a.out:
                with open(a.out / f"jct_{trace.stem}_{pol}.csv", "w", newline="") as fh:
                    w = csv.writer(fh)
                    w.writerow(["job_id", "ours_jct_s", "gavel_jct_s"])
                    for j in sorted(set(ours) | set(theirs)):
                        w.writerow([j, repr(ours[j]) if j in ours else "", repr(theirs[j]) if j in theirs else ""])
    for title, rows in gaps:
        print(f"\n{title}: largest per-job gaps (job, ours h, Gavel h):")
        for j, x, y in rows:
            print(f"  {j}: {x / 3600:.3f} vs {y / 3600:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
