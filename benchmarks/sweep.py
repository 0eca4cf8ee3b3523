"""Sweep benchmark: the same sweep in one process and as Ray tasks on a 2-node local Ray cluster.

The sweep: the 7 A-SRPT-paper policies (A-SRPT, A-SRPT-Perfect, SPJF, SPWF, WCS-Duration,
WCS-Workload, WCS-Subtime) x 4 seeds on the A-SRPT paper trial
``workloads/trials/asrpt_aaic_paper.yaml`` (the paper's 250 x 8 GPU cluster, 7,500 consecutive
AAIC jobs at a seeded start; ``--jobs`` takes fewer, ``--trial`` another trial file). Both runs
go through :func:`run_sweep`:

1. ``serial``: every cell one after the other in this process;
2. ``2-node``: a Ray cluster of two nodes on 127.0.0.1 (``ray.cluster_utils.Cluster``,
   ``--cpus-per-node`` CPUs each, started before the clock runs, as a ``ray start``
   cluster would be), the sweep attached with ``address=``.

It prints both wall times side by side, their ratio, and whether the two ``sweep.csv``
tables agree on every column that does not measure the wall clock (exit status 1 if not).

    raytestbed bench sweep [--seeds 4] [--jobs 600] [--cpus-per-node 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from raytestbed.config import load_trial
from raytestbed.resources import package_dir
from raytestbed.emu.raysession import local_cluster
from raytestbed.experiments.runner import run_sweep
from raytestbed.experiments.spec import Axis, PolicySpec, Sweep
from raytestbed.experiments.tables import deterministic_columns

TRIAL = package_dir("trials") / "asrpt_aaic_paper.yaml"
ASRPT_POLICIES = ["asrpt", "asrpt-perfect", "spjf", "spwf", "wcs-duration", "wcs-workload", "wcs-subtime"]


def asrpt_sweep(seeds: int, jobs: int | None, trial: Path = TRIAL) -> Sweep:
    """7 A-SRPT-paper policies x ``seeds`` seeds (1..seeds) on ``trial`` (``jobs`` overrides its size)."""
    loaded = load_trial(trial)
    grid = [Axis.field("workload.jobs", [jobs])] if jobs else []
    return Sweep("bench_asrpt", [loaded], [PolicySpec(p, p) for p in ASRPT_POLICIES], list(range(1, seeds + 1)),
                 "sim", grid, log_events=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=None, help="jobs per cell (default: the trial's)")
    ap.add_argument("--trial", type=Path, default=TRIAL, help="trial file (default: the A-SRPT paper trial)")
    ap.add_argument("--cpus-per-node", type=int, default=1, help="CPUs of each of the two Ray nodes")
    ap.add_argument("--out", type=Path, default=None, help="keep both sweep folders here (default: a temp folder)")
    a = ap.parse_args(argv)
    sweep = asrpt_sweep(a.seeds, a.jobs, a.trial)
    cells = sweep.cells()
    root = a.out or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    print(f"sweep: {len(sweep.policies)} policies x {a.seeds} seeds = {len(cells)} cells; host: {os.cpu_count()} "
          f"cores; folders under {root}", flush=True)

    t0 = time.perf_counter()
    serial = run_sweep(sweep, root / "serial", executor="serial", show_progress=False, force=True)
    t_serial = time.perf_counter() - t0
    print(f"serial (one process):       {t_serial:7.1f} s", flush=True)

    t0 = time.perf_counter()
    with local_cluster(nodes=2, cpus_per_node=a.cpus_per_node) as cluster:
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        par = run_sweep(sweep, root / "ray2", executor="ray", address=cluster.address, show_progress=False,
                        force=True)
        t_par = time.perf_counter() - t0
    hosts = pd.read_csv(root / "ray2" / "sweep.csv")["cell"].map(
        lambda k: __import__("json").loads((root / "ray2" / "cells" / k / "cell.json").read_text()).get("host"))
    print(f"2-node Ray ({a.cpus_per_node} CPU each): {t_par:7.1f} s   (cluster start {t_start:.1f} s, not counted)")
    print(f"ratio 2-node / serial:      {t_par / t_serial:7.3f}")
    cols = deterministic_columns(serial.table)
    same = serial.table[cols].equals(par.table[cols])
    print(f"sweep.csv: {len(serial.table)} vs {len(par.table)} rows; {len(cols)} schedule columns "
          f"{'identical' if same else 'DIFFER'} (wall-clock columns excluded: "
          f"{', '.join(c for c in serial.table.columns if c not in cols)}); failed cells: "
          f"{len(serial.failed)} / {len(par.failed)}; nodes hosting cells: {hosts.nunique()}")
    return 0 if same and not serial.failed and not par.failed else 1
