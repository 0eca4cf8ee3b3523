"""Run a sweep's cells as Ray tasks (or one after the other), resumably, then write its tables and plots.

Folder layout (``out/``)::

    sweep.csv           one row per finished cell: trial, grid values, policy, seed, every summary column
    aggregate.csv       per trial x grid point x policy: mean and 95 % confidence interval over seeds
    failures.csv        cells that failed in the last run (one-line error each), if any
    report.md           the aggregate table and the plots (metric vs grid value, a line per policy, CI bands)
    cells/TRIAL/POINT/POLICY/seed-N/   each cell's results folder (as ``raytestbed run`` writes it) + cell.json

Resume: a cell whose folder holds ``summary.json`` and a ``cell.json`` with the same
fingerprint (trial, overrides, policy, seed, backend) is kept; re-running the sweep runs
only the missing, failed or changed cells. ``reuse``: other sweep or reproduction folders whose
finished cells of the same fingerprint are copied in instead of run (a baseline two figures share).

Executors: ``ray`` (default) submits every cell as a Ray task with one CPU — on a private
local Ray using all cores, or on the cluster at ``address``; ``serial`` runs them one
after the other in this process. Both run :func:`raytestbed.experiments.cell.run_cell`,
so they give the same results. Cells whose backend starts a Ray cluster of its own (the emulator:
:attr:`raytestbed.core.backend.Backend.starts_ray`) always run one after the other in this process,
after the others.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from tqdm import tqdm

from raytestbed.backends import get_backend
from raytestbed.emu.raysession import RaySession
from raytestbed.errors import RaytestbedError
from raytestbed.experiments.cell import copy_cell, finished_cells, finished_summary, run_cell, write_cell
from raytestbed.experiments.spec import Cell, Sweep
from raytestbed.experiments.tables import write_sweep_tables

CELLS = "cells"


@dataclass
class SweepRun:
    """What a sweep run did: cells run now, kept from before, failed; the ``sweep.csv`` table."""

    out: Path
    ran: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)  #: copied from a ``reuse`` folder (also in ``kept``)
    failed: list[dict[str, Any]] = field(default_factory=list)
    table: pd.DataFrame | None = None
    wall_s: float = 0.0


def run_sweep(sweep: Sweep, out: str | Path, *, executor: str = "ray", address: str | None = None,
              workers: int | None = None, show_progress: bool = True, force: bool = False,
              on_cell: Callable[[Cell, dict[str, Any]], None] | None = None, write_tables: bool = True,
              report_failures: bool = True, reuse: tuple[str | Path, ...] = ()) -> SweepRun:
    """Run the cells of ``sweep`` not yet finished in ``out``; write ``sweep.csv``, ``aggregate.csv``, plots.

    ``executor``: ``ray`` or ``serial``; ``address``: a Ray cluster to attach to (default: a
    private local Ray with ``workers`` CPUs, default all cores); ``force``: discard finished
    cells first; ``on_cell(cell, result)``: called after each cell is written (or failed); ``reuse``:
    folders to take finished cells of the same fingerprint from (module docstring).
    """
    if executor not in ("ray", "serial"):
        raise RaytestbedError(f"executor {executor!r}: expected ray or serial")
    if workers is not None and workers < 1:
        raise RaytestbedError("--workers must be >= 1")
    for r in reuse:
        if not Path(r).is_dir():
            raise RaytestbedError(f"--reuse {r}: no such folder")
    t0 = time.perf_counter()
    out = Path(out)
    cells = sweep.cells()
    if force and (out / CELLS).exists():
        shutil.rmtree(out / CELLS)
    (out / CELLS).mkdir(parents=True, exist_ok=True)
    _remove_partials(out / CELLS)
    res = SweepRun(out)
    todo = []
    elsewhere = finished_cells(reuse) if reuse else {}
    for c in cells:
        dest = out / CELLS / c.key
        finished = finished_summary(dest, c) is not None
        src = None if finished else next((elsewhere[f] for f in c.fingerprints if f in elsewhere), None)
        if src is not None and src.resolve() != dest.resolve():
            copy_cell(src, dest, c)
            res.reused.append(c.key)
            finished = True
        if finished:
            res.kept.append(c.key)
        else:
            todo.append(c)
    bar = tqdm(total=len(cells), initial=len(res.kept), unit="cell", desc=sweep.name,
               disable=None if show_progress else True, smoothing=0.1)

    def done(cell: Cell, result: dict[str, Any]) -> None:
        if result["ok"]:
            write_cell(out / CELLS / cell.key, cell, result)
            res.ran.append(cell.key)
        else:
            res.failed.append({**cell.describe(), "error": result["error"], "host": result.get("host")})
            if report_failures and len(res.failed) == 1:  # the first at once; all of them, grouped, at the end
                bar.write(f"cell {cell.key} failed: {result['error']}")
        bar.update(1)
        bar.set_postfix(failed=len(res.failed), refresh=False)
        if show_progress and bar.disable:  # not a terminal (a log file, a pipe): a plain line per cell
            n = len(res.ran) + len(res.kept) + len(res.failed)
            print(f"{sweep.name}: cell {n}/{len(cells)} {cell.key}: {'done' if result['ok'] else 'failed'} "
                  f"({result.get('wall_s', 0.0):.1f} s)", flush=True)
        if on_cell is not None:
            on_cell(cell, result)

    own_ray = [c for c in todo if get_backend(c.backend.split(":")[0]).starts_ray]
    rest = [c for c in todo if c not in own_ray]
    try:
        if executor == "ray" and rest and _run_on_ray(rest, done, address, workers):
            pass
        else:
            for c in rest:
                done(c, run_cell(c))
        for c in own_ray:
            done(c, run_cell(c))
    finally:
        bar.close()
        res.wall_s = time.perf_counter() - t0
        if write_tables:
            res.table = write_sweep_tables(sweep, cells, out, res.failed)
    return res


def open_ray(address: str | None, workers: int | None):
    """Connect to Ray (``address``) or start a private local Ray with ``workers`` CPUs.

    A local Ray that fails to start (e.g. an overloaded host) is reported on stderr and None is
    returned: the caller runs the cells in this process instead. A cluster that cannot be
    reached is a one-line error.
    """
    try:
        return RaySession.open(address=address, num_cpus=workers or (os.cpu_count() or 1),
                               object_store_memory=None if address else 256 << 20)
    except Exception as e:  # noqa: BLE001 - Ray raises plain exceptions on start-up failures
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if address:
            raise RaytestbedError(f"--address {address}: cannot connect to Ray: {first}") from None
        print(f"raytestbed: the local Ray did not start ({first}); running the cells in this process",
              file=sys.stderr)
        return None


def _run_on_ray(cells: list[Cell], done, address: str | None, workers: int | None) -> bool:
    """Every cell as a Ray task (1 CPU, no retry); results handled as they arrive. False: no Ray."""
    import ray

    session = open_ray(address, workers)
    if session is None:
        return False
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        pending = {task.remote(c): c for c in cells}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - a worker crash fails this cell only
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    result = {"ok": False, "error": f"{type(e).__name__}: {first}", "wall_s": 0.0}
                done(cell, result)
    finally:
        session.close()
    return True


def _remove_partials(root: Path) -> None:
    """Remove the half-written cell folders of an interrupted run (``*.partial-PID``, ``*.old-PID``)."""
    for p in list(root.rglob("*.partial-*")) + list(root.rglob("*.old-*")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def failure_lines(failed: list[dict[str, Any]]) -> list[str]:
    """One line per distinct cause of the failed cells, most frequent first:
    ``26 cells failed: ConfigError: Philly data not found (...) (e.g. cell trial/base/fifo/seed-1)``."""
    groups: dict[str, list[str]] = {}
    for f in failed:
        groups.setdefault(str(f.get("error", "")).strip() or "unknown error", []).append(str(f.get("cell", "?")))
    out = []
    for error, cells in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        n = len(cells)
        out.append(f"{n} cell{'s' if n > 1 else ''} failed: {error} (e.g. cell {cells[0]})")
    return out


def print_failures(res: SweepRun, file=None) -> None:
    """One line per distinct cause of the failed cells (stderr by default)."""
    for line in failure_lines(res.failed):
        print(f"raytestbed: {line}", file=file or sys.stderr)
