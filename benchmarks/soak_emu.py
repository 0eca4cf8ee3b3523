"""Soak check of the emulated cluster: one emulated hour with faults, memory over time, nothing lost.

Runs ``workloads/trials/soak_1h.yaml`` (about one emulated hour on 4 x 4 GPUs) on the emulator with
two faults placed from the simulator's makespan M of the same trial: server 1 killed at 0.3 M and
server 2's NIC slowed 4x at 0.5 M. While it runs, samples every ``--every`` wall seconds the resident
memory (RSS) of the driver and of every Ray worker process of this session. At the end it reports:

* RSS of the driver and of the Ray workers (sum) after warm-up (the first sample after ``--warmup`` of
  the wall time) and at the end, with the growth in %; and the workers' growth over the same set of
  processes (from the first sample after warm-up at which the number of worker processes no longer
  changes: a killed server's processes leave the sum, which would hide growth elsewhere), split into
  their own (anonymous) memory, the measure of a leak, and the pages of Ray's shared object store
  that they touched (counted once per process that maps them, bounded by the one store's size);
* what is still alive when the trial ended: participants of the virtual clock, run objects left in
  the worker-pool hosts, hosts alive per server;
* every job accounted for (finished, with its failures counted).

    raytestbed bench soak-emu [--trial FILE] [--out DIR] [--every 5] [--warmup 0.2]
    python scripts/soak_emu.py [--out DIR] [--every 5] [--warmup 0.2]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import ray

from raytestbed.cli import main as cli
from raytestbed.emu import backend as emu_backend
from raytestbed.emu.raysession import RaySession
from raytestbed.resources import package_dir


RSS_PARTS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def rss_parts(pid: int) -> tuple[int, ...]:
    """Resident memory of process ``pid``, bytes, as (total, anonymous, file-backed, shared memory)
    (``/proc/PID/status``: VmRSS, RssAnon, RssFile, RssShmem; zeros if it is gone). Anonymous memory
    is the process's own heap; shared memory pages are those of Ray's object store that it touched,
    which every worker mapping them counts again."""
    got = dict.fromkeys(RSS_PARTS, 0)
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in got:
                    got[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return tuple(got[k] for k in RSS_PARTS)


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (bytes; 0 if it is gone)."""
    return rss_parts(pid)[0]


def children_of(ppid: int) -> list[int]:
    """Processes whose parent is ``ppid``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def ray_worker_pids() -> list[int]:
    """Worker processes of this driver's Ray instance (children of its raylet)."""
    node = ray._private.worker._global_node
    raylets = [p.process.pid for p in node.all_processes.get("raylet", [])] if node is not None else []
    return [c for r in raylets for c in children_of(r)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", type=Path, default=package_dir("trials") / "soak_1h.yaml")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--every", type=float, default=5.0, help="wall seconds between memory samples")
    ap.add_argument("--warmup", type=float, default=0.2, help="share of the wall time before the reference sample")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="soak_emu_"))
    out.mkdir(parents=True, exist_ok=True)

    # 1. the simulator's makespan places the faults
    assert cli(["run", str(args.trial), "--backend", "sim", "--out", str(out / "sim"), "--force", "--quiet"]) == 0
    m = json.loads((out / "sim" / "summary.json").read_text())["makespan_s"]
    faults = [f"kill_server:1@{0.3 * m:.1f}s", f"slow_nic:2@{0.5 * m:.1f}s:x4"]

    # 2. the emulator, through the same path as `raytestbed run --inject ...`, watched from inside its run
    # (wall s, driver RSS, workers RSS, worker processes, driver anonymous, workers anonymous, file, shared)
    samples: list[tuple[float, int, int, int, int, int, int, int]] = []
    end_state: dict = {}
    stop = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not stop.is_set():
            pids = ray_worker_pids() if ray.is_initialized() else []
            workers = [sum(col) for col in zip(*map(rss_parts, pids))] or [0] * len(RSS_PARTS)
            drv = rss_parts(os.getpid())
            samples.append((time.perf_counter() - t0, drv[0], workers[0], len(pids), drv[1], *workers[1:]))
            stop.wait(args.every)

    original = emu_backend.EmuDriver.run

    def watched_run(self):
        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        try:
            return original(self)
        finally:
            stop.set()
            watcher.join()
            emu = self.emu
            alive = sorted(emu.alive_servers())
            hosts = {id(h): h for g in range(emu.cluster.total_gpus) if emu.cluster.server_of(g) in alive
                     for h in [emu.pool.host(g)]}
            end_state.update(stats=emu.clock_stats(), alive=alive,
                             left=sum(len(x) for x in ray.get([h.runs.remote() for h in hosts.values()])))

    emu_backend.EmuDriver.run = watched_run
    try:
        rc = cli(["run", str(args.trial), "--backend", "emu", "--out", str(out / "emu"), "--force", "--quiet",
                  *[x for f in faults for x in ("--inject", f)]])
    finally:
        emu_backend.EmuDriver.run = original
    if rc != 0:
        raise SystemExit(f"soak: the emulated run failed (exit {rc})")
    summary = json.loads((out / "emu" / "summary.json").read_text())

    jobs = pd.read_csv(out / "emu" / "jobs.csv")
    wall = time.perf_counter() - t0
    ref = next((s for s in samples if s[0] >= args.warmup * wall), samples[0])
    end = samples[-1]
    last_change = max((i for i in range(1, len(samples)) if samples[i][3] != samples[i - 1][3]), default=0)
    same = next((x for x in samples[last_change:] if x[0] >= args.warmup * wall), samples[last_change])
    finished = int((jobs["status"] == "finished").sum())
    failures = int(jobs["failures"].sum())
    stats = end_state["stats"]
    report = {
        "trial": str(args.trial), "faults": faults, "sim_makespan_s": m, "emu_makespan_s": summary["makespan_s"],
        "wall_s": wall, "jobs": len(jobs), "finished": finished, "failures": failures,
        "driver_rss_mb": [ref[1] / 2**20, end[1] / 2**20], "workers_rss_mb": [ref[2] / 2**20, end[2] / 2**20],
        "worker_processes": [ref[3], end[3]],
        "driver_growth": end[1] / ref[1] - 1, "workers_growth": end[2] / ref[2] - 1,
        "workers_same_processes": {"from_wall_s": same[0], "rss_mb": [same[2] / 2**20, end[2] / 2**20],
                                   "processes": end[3], "growth": end[2] / same[2] - 1,
                                   "anon_mb": [same[5] / 2**20, end[5] / 2**20], "anon_growth": end[5] / same[5] - 1,
                                   "shmem_mb": [same[7] / 2**20, end[7] / 2**20]},
        "driver_anon_mb": [ref[4] / 2**20, end[4] / 2**20], "driver_anon_growth": end[4] / ref[4] - 1,
        "clock_participants_at_end": stats["participants"], "run_objects_left": end_state["left"],
        "alive_servers": end_state["alive"], "late_steps": stats["late_steps"], "stalls": stats["stalls"],
    }
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    with open(out / "rss.csv", "w") as f:
        f.write("wall_s,driver_rss_bytes,workers_rss_bytes,worker_processes,driver_anon_bytes,workers_anon_bytes,"
                "workers_file_bytes,workers_shmem_bytes\n")
        for s in samples:
            f.write(",".join(map(str, s)) + "\n")
    print(f"soak: {len(jobs)} jobs, {finished} finished ({failures} failures re-run), emulated makespan "
          f"{summary['makespan_s']:.0f} s (simulator {m:.0f} s) in {wall:.0f} s wall; faults {', '.join(faults)}")
    print(f"RSS after warm-up -> end: driver {report['driver_rss_mb'][0]:.0f} -> {report['driver_rss_mb'][1]:.0f} MB "
          f"({100 * report['driver_growth']:+.1f} %), Ray workers {report['workers_rss_mb'][0]:.0f} -> "
          f"{report['workers_rss_mb'][1]:.0f} MB ({100 * report['workers_growth']:+.1f} %) over "
          f"{ref[3]} -> {end[3]} processes")
    w = report["workers_same_processes"]
    store = inspect.signature(RaySession.open).parameters["object_store_memory"].default
    print(f"Ray workers, the same {w['processes']} processes from {w['from_wall_s']:.0f} s wall: "
          f"{w['rss_mb'][0]:.0f} -> {w['rss_mb'][1]:.0f} MB ({100 * w['growth']:+.1f} %); of it their own (anonymous) "
          f"memory {w['anon_mb'][0]:.0f} -> {w['anon_mb'][1]:.0f} MB ({100 * w['anon_growth']:+.1f} %) and the pages of "
          f"Ray's shared object store they touched {w['shmem_mb'][0]:.0f} -> {w['shmem_mb'][1]:.0f} MB (summed over "
          f"processes; one store of at most {store / 2**30:g} GiB holds them)")
    print(f"at the end: {report['clock_participants_at_end']} clock participants, {report['run_objects_left']} run "
          f"objects in the hosts, servers alive {report['alive_servers']}; late steps {report['late_steps']}")
    print(f"results: {out}")
    return 0
