"""Run one sweep cell through :func:`raytestbed.trial.run_into` (the path of ``raytestbed run``).

:func:`run_cell` runs where it is called — in the sweep's own process, or in a Ray
worker on any node — into a private temporary folder, and returns the folder's files
as bytes with the summary, so the driver writes every cell folder itself (no shared
file system between nodes is needed). A failure is returned as a one-line error, never
raised: one failed cell does not stop the others.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from raytestbed.config import parse_trial
from raytestbed.results.journal import JOURNAL
from raytestbed.results.writer import ResultsFolder, write_json
from raytestbed.trial import BackendSpec, PolicyPair, run_into

CELL_FILE = "cell.json"


def run_cell(cell) -> dict[str, Any]:
    """Run ``cell`` (a :class:`~raytestbed.experiments.spec.Cell`); return ``{"ok", "summary", "files", ...}``.

    ``files`` maps each file's path relative to the run folder to its bytes; on failure
    ``ok`` is False and ``error`` names the exception in one line (``traceback`` has the rest).
    """
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="raytestbed-cell-"))
    host = _node()
    try:
        loaded = parse_trial(cell.data, f"cell {cell.key}", Path(cell.path) if cell.path else None)
        pair = PolicyPair.parse(cell.pair)
        run_dir = tmp / "run"
        summary = run_into(run_dir, loaded, pair, cell.seed, BackendSpec.parse(cell.backend), show_progress=False,
                           log_events=cell.log_events, report=cell.report, log_decisions=cell.log_decisions)
        # a finished cell's journal repeats its jobs.csv (only an interrupted run needs it to resume): not
        # carried through Ray's object store nor kept (a 75,000-job cell's is ~10 MB)
        files = {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
                 if p.is_file() and p.name != JOURNAL}
        return {"ok": True, "summary": summary, "files": files, "wall_s": time.perf_counter() - t0, "host": host,
                "pid": os.getpid()}
    except Exception as e:  # noqa: BLE001 - reported per cell, the sweep goes on
        msg = str(e).splitlines()[0] if str(e) else ""
        return {"ok": False, "error": f"{type(e).__name__}: {msg}", "traceback": traceback.format_exc(),
                "wall_s": time.perf_counter() - t0, "host": host, "pid": os.getpid()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _node() -> str:
    """This process's Ray node id (in a Ray worker), else the host name."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - only a label
        pass
    return os.uname().nodename


def write_cell(folder: Path, cell, result: dict[str, Any]) -> None:
    """Write a finished cell's files into ``folder`` atomically, with ``cell.json`` (its fingerprint)."""
    with ResultsFolder(folder, force=True) as rf:
        for rel, blob in result["files"].items():
            p = rf.path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(blob)
        write_json(rf.path / CELL_FILE, {"fingerprint": cell.fingerprint, **cell.describe(), "pair": cell.pair,
                                         "backend": cell.backend, "trial_file": cell.path,
                                         "cell_wall_s": result["wall_s"], "host": result.get("host")})


def finished_cells(roots) -> dict[str, Path]:
    """The finished cells (``cell.json`` beside ``summary.json``) under the folders ``roots``, by fingerprint;
    where two hold the same fingerprint, the first found (roots in order, paths sorted) is kept."""
    index: dict[str, Path] = {}
    for root in roots:
        for meta in sorted(Path(root).rglob(CELL_FILE)):
            if not (meta.parent / "summary.json").is_file():
                continue
            try:
                fp = json.loads(meta.read_text(encoding="utf-8")).get("fingerprint")
            except (OSError, json.JSONDecodeError):
                continue
            if fp:
                index.setdefault(fp, meta.parent)
    return index


def copy_cell(src: Path, folder: Path, cell) -> None:
    """Take a cell finished in another folder (``src``, the same fingerprint: the same result) as ``cell``:
    its files copied into ``folder`` atomically, its ``cell.json`` naming ``cell`` and ``reused_from``."""
    meta = json.loads((src / CELL_FILE).read_text(encoding="utf-8"))
    with ResultsFolder(folder, force=True) as rf:
        for p in src.rglob("*"):
            if p.is_file() and p.name != CELL_FILE:
                dest = rf.path / p.relative_to(src)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest)
        write_json(rf.path / CELL_FILE, {**meta, **cell.describe(), "reused_from": str(src)})


def finished_summary(folder: Path, cell) -> dict[str, Any] | None:
    """The summary of a cell already finished in ``folder`` with the same fingerprint, else None."""
    meta, summ = folder / CELL_FILE, folder / "summary.json"
    if not (meta.is_file() and summ.is_file()):
        return None
    try:
        if json.loads(meta.read_text(encoding="utf-8")).get("fingerprint") not in cell.fingerprints:
            return None
        return json.loads(summ.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
