"""The finished-job journal that lets an interrupted trial resume (``--resume DIR``).

While a trial runs, every job that finishes is appended at once to
``journal.jsonl`` in the results folder (one JSON line, flushed to the OS
immediately, so a Ctrl-C or a crash of the Python process loses nothing that
was written). The first line is a header that pins the trial: policy pair,
backend, seed and a fingerprint of the job list.

Resume semantics (what ``--resume`` guarantees, see docs/trials.md "Resume"):

1. the same trial is rebuilt with the same seed; the job list must have the same
   fingerprint as the journal's header (else a one-line error);
2. the whole trial runs again from t = 0 (every job, the same policy objects built
   afresh), so the journaled jobs hold their GPUs and links as they did and the
   remaining jobs see the same cluster and the same policy state;
3. each journaled job's record is checked against its re-run's when it finishes
   again (:meth:`JournalState.differences`); the journaled record is kept verbatim
   in ``jobs.csv``; a difference is reported at once and marks the run
   "resumed, not comparable" (summary, report, comparison table);
4. every job of the trial appears exactly once in the final ``jobs.csv``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from raytestbed.core.job import Job
from raytestbed.errors import RaytestbedError
from raytestbed.results.writer import dumps

JOURNAL = "journal.jsonl"
RESUMABLE = "RESUMABLE.json"
VERSION = 1


def jobs_fingerprint(jobs: Sequence[Job]) -> str:
    """SHA-256 (first 16 hex digits) over each job's id, arrival, iterations, comm and stage shapes."""
    h = hashlib.sha256()
    for j in sorted(jobs, key=lambda j: j.job_id):
        stages = [(s.replicas, s.profile.fwd_s, s.profile.bwd_s, s.profile.out_bytes, s.profile.param_bytes)
                  for s in j.stages]
        h.update(repr((j.job_id, j.arrival_s, j.iterations, j.comm.value, j.model, j.num_ps, stages)).encode())
    return h.hexdigest()[:16]


def _restore(v: Any) -> Any:
    return math.nan if v is None else v


def _same(a: Any, b: Any) -> bool:
    """Equal as journaled values: NaN equals NaN (and None, JSON's NaN); lists equal tuples."""
    a, b = _restore(a), _restore(b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@dataclass
class JournalState:
    """What a journal holds: header and finished jobs (rows of ``jobs.csv`` plus extras)."""

    header: dict[str, Any]
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)  #: job id -> jobs.csv row
    intervals: list[tuple[int, float, float, int]] = field(default_factory=list)  #: GPU holding intervals
    extra: dict[int, dict[str, Any]] = field(default_factory=dict)  #: job id -> backend extras

    def differences(self, jid: int, row: dict[str, Any], intervals: Sequence[tuple[float, float, int]],
                    extra: dict[str, Any] | None = None) -> list[str]:
        """How a re-run of journaled job ``jid`` differs from its journaled record (empty: identical).

        Compares every ``jobs.csv`` field, the backend extras and the GPU-holding intervals
        (start_s, end_s, gpus), exactly (floats by value; NaN equals NaN). Each difference reads
        ``field: journal X, re-run Y``.
        """
        out = []
        old = self.rows[jid]
        for key in sorted(set(old) | set(row)):
            if not _same(old.get(key), row.get(key)):
                out.append(f"{key}: journal {old.get(key)!r}, re-run {row.get(key)!r}")
        old_extra, new_extra = self.extra.get(jid, {}), extra or {}
        for key in sorted(set(old_extra) | set(new_extra)):
            if not _same(old_extra.get(key), new_extra.get(key)):
                out.append(f"{key}: journal {old_extra.get(key)!r}, re-run {new_extra.get(key)!r}")
        old_iv = [(s, e, g) for j, s, e, g in self.intervals if j == jid]
        if not _same(old_iv, [tuple(iv) for iv in intervals]):
            out.append(f"GPU intervals: journal {old_iv}, re-run {[tuple(iv) for iv in intervals]}")
        return out

    def check(self, header: dict[str, Any], where: str) -> None:
        """Raise unless ``header`` describes the same trial (policy, backend, seed, jobs)."""
        for key in ("policy", "backend", "seed", "jobs_fingerprint", "jobs"):
            if self.header.get(key) != header.get(key):
                raise RaytestbedError(
                    f"{where}: cannot resume: {key} differs (journal: {self.header.get(key)!r}, "
                    f"this trial: {header.get(key)!r})")


def read_journal(path: Path) -> JournalState:
    """Parse a journal; a truncated last line (crash mid-write) is ignored."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise RaytestbedError(f"{path}: cannot read journal: {e.strerror}") from None
    state: JournalState | None = None
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break  # torn last write
            raise RaytestbedError(f"{path} line {n}: not valid JSON") from None
        kind = rec.get("kind")
        if kind == "header":
            state = JournalState(header=rec)
        elif kind == "finished":
            if state is None:
                raise RaytestbedError(f"{path} line {n}: finished-job record before the header")
            row = {k: _restore(v) for k, v in rec["row"].items()}
            jid = int(row["job_id"])
            state.rows[jid] = row
            state.intervals = [iv for iv in state.intervals if iv[0] != jid]
            state.intervals += [(jid, float(s), float(e), int(g)) for s, e, g in rec.get("intervals", [])]
            if rec.get("extra"):
                state.extra[jid] = rec["extra"]
    if state is None:
        raise RaytestbedError(f"{path}: journal has no header")
    return state


class JournalWriter:
    """Append-only writer; each record is flushed as soon as it is written."""

    def __init__(self, path: Path, header: dict[str, Any], previous: JournalState | None = None) -> None:
        self.path = Path(path)
        self._f = open(self.path, "w", encoding="utf-8")
        self._write({"kind": "header", "version": VERSION, **header})
        self.count = 0
        if previous is not None:
            for jid, row in sorted(previous.rows.items()):
                ivs = [(s, e, g) for j, s, e, g in previous.intervals if j == jid]
                self.finished(row, ivs, previous.extra.get(jid))

    def _write(self, obj: dict[str, Any]) -> None:
        self._f.write(dumps(obj) + "\n")
        self._f.flush()

    def finished(self, row: dict[str, Any], intervals: Sequence[tuple[float, float, int]],
                 extra: dict[str, Any] | None = None) -> None:
        """Journal one finished job: its ``jobs.csv`` row and GPU-holding intervals (start_s, end_s, gpus)."""
        rec: dict[str, Any] = {"kind": "finished", "row": row, "intervals": [list(iv) for iv in intervals]}
        if extra:
            rec["extra"] = extra
        self._write(rec)
        self.count += 1

    def close(self) -> None:
        self._f.close()
