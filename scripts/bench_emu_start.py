"""Job start latency on the emulated cluster: worker pool vs per-job actors, side by side.

Latency = wall seconds from the ``start_job`` call to the first ``on_iteration`` report reaching the
reporter actor, less that iteration's own wall time (so it is the start-up cost alone; the raw
latency is printed too). The two modes alternate job by job on ONE EmuCluster (pooled; per-job
actors via ``start_job(..., worker_pool=False)``), so both see the same host load.
Also printed: the one-off cost of starting the pool (before any trial clock) and the resident
memory of its host processes.

    PYTHONPATH=$PWD python scripts/bench_emu_start.py [--jobs 8] [--servers 2] [--gpus 2] [--compute replay]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import ray

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.emu.cluster import EmuCluster
from raytestbed.emu.executors import start_job
from raytestbed.emu.pool import WorkerPool
from raytestbed.traces.jobs import build_job


class Reporter:
    """Wall time of each job's first iteration report, and that iteration's emulated duration."""

    def __init__(self) -> None:
        self.first: dict[int, tuple[float, float]] = {}

    def on_iteration(self, job_id, iteration, iter_s, compute_s, comm_s, *end_wall) -> None:
        self.first.setdefault(job_id, (time.time(), float(iter_s)))

    def on_job_done(self, *a) -> None:
        pass

    def on_job_failed(self, *a) -> None:
        pass

    def get(self, job_id):
        return self.first.get(job_id)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def make_job(job_id: int, compute: str, gpus_per_stage: int) -> tuple[Job, int]:
    """A two-stage pipeline job (stage 0 on server 0, stage 1 on server 1), one iteration."""
    if compute == "real":
        return build_job(job_id, 0.0, default_profiles()["mlp-tiny"], 2 * gpus_per_stage, "pipeline", 1,
                         num_stages=2), 1
    prof = StageProfile(0.002, 0.004, out_bytes=100_000.0, param_bytes=100_000.0)
    last = StageProfile(0.002, 0.004, out_bytes=0.0, param_bytes=100_000.0)
    return Job(job_id, 0.0, 1, (Stage(gpus_per_stage, prof), Stage(gpus_per_stage, last)), CommPattern.PIPELINE,
               model="bench"), 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8, help="job starts per mode (alternating)")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--gpus", type=int, default=2, help="GPUs per server (= workers per stage)")
    ap.add_argument("--compute", choices=("replay", "real"), default="replay")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # real compute: 4 workers > 2 cores is expected here

    print(f"host: {os.cpu_count()} cores, load average at start {os.getloadavg()}")
    cluster = Cluster.homogeneous(args.servers, args.gpus, 62.5e6, 50e6, name="bench-start")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        emu = EmuCluster(cluster, time_scale=1.0, worker_pool=False)
        t_cluster = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        emu.pool = WorkerPool(emu, 300.0)
        t_pool = time.perf_counter() - t0
        print(f"EmuCluster without pool: {t_cluster:.1f} s; starting the pool ({emu.pool.processes} processes, "
              f"once, before any trial clock): {t_pool:.1f} s")
        if args.compute == "real":  # as run_emulated does for compute: real
            t0 = time.perf_counter()
            emu.pool.preload_real_compute()
            print(f"importing torch in the pool's GPU hosts (once, before any trial clock): "
                  f"{time.perf_counter() - t0:.1f} s")
        rep = ray.remote(num_cpus=0)(Reporter).remote()
        g = args.gpus
        place = Placement((tuple(range(g)), tuple(range(g, 2 * g))))
        res: dict[str, list[tuple[float, float]]] = {"pool": [], "per-job actors": []}
        jid = 0
        for i in range(args.jobs):
            for mode in (("pool", "per-job actors") if i % 2 == 0 else ("per-job actors", "pool")):
                job, iters = make_job(jid, args.compute, g)
                t_call = time.time()
                run = start_job(emu, job, place, iterations=iters, mode=args.compute, reporter=rep,
                                worker_pool=(mode == "pool"))
                if not run.wait(600) or run.failure is not None:
                    print(f"job {jid} ({mode}) failed: {run.failure}", file=sys.stderr)
                    return 1
                got = None
                for _ in range(200):
                    got = ray.get(rep.get.remote(jid))
                    if got is not None:
                        break
                    time.sleep(0.01)
                t_first, iter_emu = got
                raw = t_first - t_call
                res[mode].append((raw, raw - iter_emu / float(emu.time_scale.to_emu(1.0))))
                jid += 1
        pids = ray.get([h.pid.remote() for h in emu.pool.hosts])
        mem = [rss_mb(p) for p in pids]
        print(f"\n{args.jobs} starts per mode, 2-stage pipeline, {g} worker(s) per stage on 2 servers "
              f"({2 * g} workers + monitor), compute {args.compute}; wall seconds, start_job call -> first iteration "
              f"reported, less that iteration")
        print(f"{'mode':<16} {'median':>8} {'mean':>8} {'min':>8} {'max':>8} {'raw median':>11}")
        med = {}
        for mode, xs in res.items():
            net = [x[1] for x in xs]
            med[mode] = statistics.median(net)
            print(f"{mode:<16} {med[mode]:8.3f} {statistics.mean(net):8.3f} {min(net):8.3f} {max(net):8.3f} "
                  f"{statistics.median(x[0] for x in xs):11.3f}")
        print(f"ratio per-job actors / pool (median start latency): {med['per-job actors'] / med['pool']:.1f}x")
        print(f"pool GPU hosts RSS after the runs: {', '.join(f'{m:.0f}' for m in mem)} MB")
        print(f"load average at end {os.getloadavg()}")
    finally:
        emu.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
