"""Results folders, written atomically.

A run writes into ``<out>.partial-<pid>`` next to the target and renames it to
``<out>`` only when everything is written, so a crash or Ctrl-C never leaves a
half-written results folder (the partial folder is removed on error) — except
when the run is *resumable*: if at least one job had finished (a
``journal.jsonl`` with finished-job records exists, see
:mod:`raytestbed.results.journal`), the partial folder is moved to ``<out>``
with a ``RESUMABLE.json`` marker, and ``--resume <out>`` continues it.

Folder contents: ``config.yaml`` (resolved trial), ``jobs.csv``, ``events.jsonl``,
``decisions.jsonl``, ``summary.json`` and, for comparisons, ``comparison.csv``
and plots.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from raytestbed.errors import RaytestbedError


def policy_folder(policy: str) -> str:
    """The sub-folder of a comparison for ``policy``: its id with ``:`` (an import path's separator, which
    some file systems and URLs do not take) written as ``.``, e.g. ``my_sched.policies.Greedy``."""
    return str(policy).replace(":", ".")


def _clean(v: Any) -> Any:
    """JSON-safe value: NaN/inf become None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def dumps(obj: Any) -> str:
    """Compact deterministic JSON (NaN as null).

    Most records (every event of a run) hold only finite numbers and string or number keys: those are
    written as they are, in one pass of ``json``; the others (a NaN, a tuple key) go through :func:`_clean`
    first."""
    try:
        return json.dumps(obj, separators=(",", ":"), sort_keys=False, allow_nan=False)
    except (ValueError, TypeError):
        return json.dumps(_clean(obj), separators=(",", ":"), sort_keys=False)


def write_json(path: Path, obj: Any) -> None:
    """Indented JSON with NaN/inf as null."""
    Path(path).write_text(json.dumps(_clean(obj), indent=2) + "\n", encoding="utf-8")


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """CSV with floats written by ``repr`` (exact and byte-stable across runs); NaN as empty."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if (isinstance(v := r.get(c, ""), float) and math.isnan(v)) else
                        (repr(v) if isinstance(v, float) else v) for c in columns])


def _has_finished_jobs(folder: Path) -> bool:
    """True if any ``journal.jsonl`` under ``folder`` records a finished job."""
    for j in Path(folder).rglob("journal.jsonl"):
        with open(j, encoding="utf-8") as f:
            if any('"kind":"finished"' in line for line in f):
                return True
    return False


class FolderExistsError(RaytestbedError):
    """The results folder exists and is not empty; the message says how to replace (or resume) it, in the
    words of the entry point: ``--force`` on the command line, ``force=True`` in Python (:meth:`for_python`)."""

    def __init__(self, out: Path, resumable: bool = False, python: bool = False) -> None:
        self.out, self.resumable, self.python = Path(out), resumable, python
        force = "force=True" if python else "--force"
        resume = (" or raytestbed run/compare --resume to continue it" if python else " or --resume to continue it"
                  ) if resumable else ""
        super().__init__(f"{self.out}: results folder exists and is not empty (use {force} to replace it{resume})")

    def for_python(self) -> "FolderExistsError":
        """The same error, worded for the Python API."""
        return FolderExistsError(self.out, self.resumable, python=True)

    def __reduce__(self):
        return (type(self), (self.out, self.resumable, self.python))


class ResultsFolder:
    """A results folder under construction; use as a context manager.

    Args:
        out: the final folder path.
        force: replace an existing folder instead of refusing.
    """

    def __init__(self, out: str | os.PathLike, force: bool = False, resumable: dict[str, Any] | None = None) -> None:
        self.out = Path(out)
        if self.out.exists() and any(self.out.iterdir()) and not force:
            raise FolderExistsError(self.out, (self.out / "RESUMABLE.json").exists())
        self.force = force
        self.resumable = resumable
        self.preserved = False
        self.tmp = self.out.with_name(f"{self.out.name}.partial-{os.getpid()}")
        self._streams: dict[str, Any] = {}

    def __enter__(self) -> "ResultsFolder":
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        for f in self._streams.values():
            f.close()
        if exc_type is not None:
            # an interruption or a crash keeps the finished jobs; a user error (a policy fault, bad input)
            # would only fail again on resume, so it leaves nothing
            if (self.resumable is not None and not issubclass(exc_type, RaytestbedError)
                    and _has_finished_jobs(self.tmp)):
                write_json(self.tmp / "RESUMABLE.json", self.resumable)
                self._replace_out()
                self.preserved = True
                return
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        (self.tmp / "RESUMABLE.json").unlink(missing_ok=True)
        self._replace_out()

    def _replace_out(self) -> None:
        if self.out.exists():
            old = self.out.with_name(f"{self.out.name}.old-{os.getpid()}")
            os.replace(self.out, old)
            os.replace(self.tmp, self.out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.out)

    @property
    def path(self) -> Path:
        """Where files go while the folder is being written."""
        return self.tmp

    def jsonl(self, name: str):
        """An open append stream for ``name`` (e.g. ``events.jsonl``); write with :meth:`write_line`."""
        if name not in self._streams:
            self._streams[name] = open(self.tmp / name, "w", encoding="utf-8")
        return self._streams[name]

    def write_line(self, name: str, obj: Any) -> None:
        self.jsonl(name).write(dumps(obj) + "\n")

    def write_json(self, name: str, obj: Any) -> None:
        write_json(self.tmp / name, obj)

    def write_yaml(self, name: str, obj: Any) -> None:
        (self.tmp / name).write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")

    def write_csv(self, name: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
        write_csv(self.tmp / name, rows, columns)
