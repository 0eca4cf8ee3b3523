"""Run a trial: build cluster, jobs and policies from a trial file, run them on a backend, write results.

Used by ``raytestbed run``, ``compare`` and ``parity`` (see :mod:`raytestbed.cli`).
Backends (:mod:`raytestbed.backends`, each a :class:`raytestbed.core.backend.Backend`): ``sim`` (the
discrete-event simulator, :mod:`raytestbed.sim.backend`) and ``emu`` (the Ray emulated cluster,
:mod:`raytestbed.emu.backend`). Both return the same :class:`~raytestbed.core.eventcore.RunResult`, with
their own extra columns and files on it; every finished job is journaled at once (``journal.jsonl``,
:mod:`raytestbed.results.journal`) so an interrupted trial can be resumed.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm import tqdm

from raytestbed.backends import BACKENDS, get_backend
from raytestbed.config import LoadedTrial
from raytestbed.core.backend import Backend, LiveBooks, TrialRun
from raytestbed.core.events import Fault, JobFinished
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.core.job import admit_in_epochs
from raytestbed.core.timing import make_iteration_model
from raytestbed.errors import ConfigError, RaytestbedError
from raytestbed.results.journal import JOURNAL, RESUMABLE, JournalState, JournalWriter, jobs_fingerprint, read_journal
from raytestbed.results.objectives import CoflowClock, utility_summary
from raytestbed.results.parity import parity, write_parity
from raytestbed.results.plots import comparison_bars
from raytestbed.results.ranking import ranks
from raytestbed.results.records import JOB_COLUMNS, SUMMARY_KEYS, job_rows, params_record, summarize
from raytestbed.results.report import compare_report, run_report
from raytestbed.results.writer import ResultsFolder, dumps, policy_folder, write_csv, write_json
from raytestbed.schedulers.base import make_policy, policy_class
from raytestbed.traces.registry import load_workload
from raytestbed.traces.throughputs import load_throughputs

_FAULT = re.compile(r"^(kill_server|slow_nic):(\d+)@([0-9.]+)s?(?::x([0-9.]+))?$")


@dataclass(frozen=True)
class PolicyPair:
    """A placement policy and an optional network policy, written ``a+b``."""

    placement: str
    network: str | None = None

    @classmethod
    def parse(cls, text: str, network: str | None = None) -> "PolicyPair":
        parts = [p.strip() for p in text.split("+")]
        if len(parts) > 2 or not all(parts):
            raise ConfigError(f"policy {text!r}: write a placement policy, optionally '+network policy'")
        if len(parts) == 2:
            if network is not None and network != parts[1]:
                raise ConfigError(f"policy {text!r} conflicts with network_policy {network!r}")
            return cls(parts[0], parts[1])
        return cls(parts[0], network)

    def __str__(self) -> str:
        return self.placement + (f"+{self.network}" if self.network else "")


def parse_fault(text: str) -> Fault:
    """``kill_server:1@120s`` -> Fault(kill_server, 1, 120.0); ``slow_nic:2@300s:x4`` -> server 2's NIC
    runs 4x slower from t = 300 s."""
    m = _FAULT.match(text.strip())
    if not m:
        raise ConfigError(f"fault {text!r}: expected 'kill_server:SERVER@SECONDSs' or "
                          f"'slow_nic:SERVER@SECONDSs:xFACTOR'")
    kind, factor = m.group(1), m.group(4)
    if (kind == "slow_nic") != (factor is not None):
        raise ConfigError(f"fault {text!r}: slow_nic needs ':xFACTOR' (and kill_server takes none)")
    f = float(factor) if factor is not None else 1.0
    if not (math.isfinite(f) and f > 0) or not math.isfinite(float(m.group(3))):
        raise ConfigError(f"fault {text!r}: the time and factor must be finite numbers > 0")
    return Fault(kind, int(m.group(2)), float(m.group(3)), f)


def with_faults(loaded: LoadedTrial, specs: list[str] | None) -> LoadedTrial:
    """The trial with extra faults (``--inject``), each validated like the trial's own ``faults``."""
    if not specs:
        return loaded
    extra = []
    for text in specs:
        for part in text.split(","):
            if part.strip():
                parse_fault(part)
                extra.append(part.strip())
    trial = loaded.trial.model_copy(update={"faults": [*loaded.trial.faults, *extra]})
    return loaded.model_copy(update={"trial": trial})


@dataclass(frozen=True)
class BackendSpec:
    """A backend, optionally with a mode: ``sim``, ``sim:analytic``, ``sim:flow``, ``emu``, ``emu:replay``,
    ``emu:real`` (the mode overrides the trial's ``timing.mode`` resp. ``emu.compute``; the backend says
    which: :attr:`raytestbed.core.backend.Backend.modes`)."""

    name: str
    mode: str | None = None

    @classmethod
    def parse(cls, text: str) -> "BackendSpec":
        name, _, mode = text.strip().partition(":")
        if name not in BACKENDS:
            raise ConfigError(f"backend {text!r}: expected {' or '.join(BACKENDS)}, optionally with ':mode'")
        modes = BACKENDS[name].modes
        if mode and mode not in modes:
            raise ConfigError(f"backend {text!r}: mode must be one of {', '.join(modes)}")
        return cls(name, mode or None)

    @property
    def backend(self) -> Backend:
        return get_backend(self.name)

    @property
    def label(self) -> str:
        return self.name + (f"-{self.mode}" if self.mode else "")

    def apply(self, loaded: LoadedTrial) -> LoadedTrial:
        """The trial with this backend's mode override applied."""
        if self.mode is None:
            return loaded
        return loaded.model_copy(update={"trial": self.backend.with_mode(loaded.trial, self.mode)})


def _as_spec(backend: str | BackendSpec | None, loaded: LoadedTrial) -> BackendSpec:
    if isinstance(backend, BackendSpec):
        return backend
    return BackendSpec.parse(backend or loaded.trial.backend)


class _FinishedJournal:
    """Journal each job as it finishes (called from the backend's event callback).

    On a resumed run (``previous``), a journaled job that finishes again is not journaled twice:
    its re-run is checked against the journal, and every difference is reported at once (stderr)
    and kept in :attr:`differing` (job id -> differences).
    """

    def __init__(self, writer: JournalWriter, previous: JournalState | None = None) -> None:
        self.writer = writer
        self.books: LiveBooks | None = None  #: the running backend's books (set when the run starts)
        self.previous = previous
        self.differing: dict[int, list[str]] = {}
        self.replayed: set[int] = set()
        self._seen = 0
        self._intervals: dict[int, list] = {}

    def __call__(self, jid: int) -> None:
        books = self.books
        assert books is not None, "a job finished before the backend handed over its books"
        busy = books.busy
        for j, s, e, g in busy[self._seen:]:
            self._intervals.setdefault(j, []).append((s, e, g))
        self._seen = len(busy)
        rec = books.records[jid]
        extra = books.job_extra(jid)
        row, intervals = job_rows([rec])[0], self._intervals.pop(jid, [])
        if self.previous is not None and jid in self.previous.rows:
            self.replayed.add(jid)
            diff = self.previous.differences(jid, row, intervals, extra)
            if diff:
                self.differing[jid] = diff
                tqdm.write(f"raytestbed: warning: resume: job {jid}'s re-run differs from its journaled record "
                           f"({'; '.join(diff[:3])}{'; ...' if len(diff) > 3 else ''}); the journaled record is "
                           f"kept and the run is marked 'resumed, not comparable'", file=sys.stderr)
            return
        self.writer.finished(row, intervals, extra)

    def resume_note(self, jobs: int, deterministic: bool = True) -> tuple[dict[str, Any], str]:
        """The ``resumed`` section of ``summary.json`` and the run's ``note`` (both about the journal check).

        ``deterministic``: False for a backend that cannot re-run identically (real compute); the run
        is then not comparable whatever the check found.
        """
        prev = self.previous
        assert prev is not None
        missing = sorted(set(prev.rows) - self.replayed)  # journaled as finished, not finished in the re-run
        for jid in missing:
            self.differing[jid] = ["finished in the journal, not in the re-run"]
        comparable = deterministic and not self.differing
        section = {"journaled_jobs": len(prev.rows), "remaining_jobs": jobs - len(prev.rows),
                   "differing_jobs": sorted(self.differing), "comparable": comparable}
        if comparable:
            return section, f"resumed: {len(prev.rows)} journaled jobs re-run identically"
        why = "" if deterministic else "real compute does not re-run identically; "
        if not self.differing:
            return section, f"resumed, not comparable: {why}its {len(prev.rows)} journaled jobs happened to re-run identically"
        jid = min(self.differing)
        return section, (f"resumed, not comparable: {why}{len(self.differing)} of {len(prev.rows)} journaled jobs "
                         f"differ from their re-run (job {jid}: {self.differing[jid][0]})")


def check_identical_servers(name: str, cls: type, cluster) -> None:
    """ConfigError (one line) if policy ``name`` needs identical servers and ``cluster``'s differ."""
    reason = getattr(cls, "needs_identical_servers", None)
    if reason and not cluster.identical_servers:
        counts = ", ".join(map(str, sorted({s.gpus for s in cluster.servers})))
        raise ConfigError(f"policy {name!r} needs identical servers (the same GPU count each): {reason}; cluster "
                          f"{cluster.name!r} has servers of {counts} GPUs")


def trial_speeds(loaded: LoadedTrial, cluster, jobs=None) -> GpuSpeeds:
    """The per-type speeds of a trial: its cluster's GPU types and factors, and its throughput table
    (``timing.throughputs``, else the table the workload brought, e.g. a ``gavel`` trace's)."""
    ref = loaded.trial.timing.throughputs
    table = load_throughputs(ref, loaded.base_dir) if ref else getattr(jobs, "throughputs", None)
    return GpuSpeeds(cluster, table)


def run_into(
    folder: Path,
    loaded: LoadedTrial,
    pair: PolicyPair,
    seed: int,
    backend: str | BackendSpec | None = None,
    show_progress: bool = True,
    log_events: bool = True,
    report: bool = True,
    previous: JournalState | None = None,
    log_decisions: bool = True,
) -> dict[str, Any]:
    """Run one policy pair on a backend and write its results files into ``folder``; return the summary.

    ``log_events`` / ``log_decisions``: write every event to ``events.jsonl`` / every policy answer to
    ``decisions.jsonl`` (False: the file is left empty; a sweep's bulk cells can do without them).

    ``previous``: the journal of an interrupted run of the same trial; its finished jobs keep their
    records and are not run again (semantics: :mod:`raytestbed.results.journal`).
    """
    t0 = time.perf_counter()
    spec = _as_spec(backend, loaded)
    runner = spec.backend
    if (missing := runner.missing()):
        raise RaytestbedError(f"backend {spec.name}: {missing}")
    loaded = spec.apply(loaded)
    trial = loaded.trial
    folder.mkdir(parents=True, exist_ok=True)
    cluster = loaded.cluster_config.build()
    wl = trial.workload.model_dump()
    kind = wl.pop("kind")
    loaded_jobs = load_workload(kind, wl, cluster, seed, loaded.base_dir,
                                where=f"{loaded.path or 'trial'}: workload", profiles=loaded.profiles)
    jobs = admit_in_epochs(loaded_jobs, trial.timing.admission_epoch_s)
    params = trial.policy_params
    search = [loaded.base_dir]  # import-path plug-ins may live beside the trial file
    # the predictor history rides on the loaded job set (a plain list after admission)
    policy = make_policy(pair.placement, "placement", seed, search,
                         **with_workload_history(pair.placement, params.get(pair.placement, {}), loaded_jobs,
                                                 search))
    check_identical_servers(pair.placement, type(policy), cluster)
    speeds = trial_speeds(loaded, cluster, loaded_jobs)
    if (refusal := runner.refusal(trial, [pair.network] if pair.network else [], jobs, speeds)):
        raise ConfigError(refusal)
    netpol = None
    if pair.network is not None:
        netpol = make_policy(pair.network, "network", seed, search, **params.get(pair.network, {}))
    try:
        model = make_iteration_model(trial.timing.model, **trial.timing.model_params)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"timing.model_params: {e}") from None
    faults = [parse_fault(f) for f in trial.faults]
    for f in faults:
        if f.target >= cluster.num_servers:
            raise ConfigError(f"fault {f.kind}:{f.target}: the cluster has servers 0..{cluster.num_servers - 1}")

    header = {"trial": trial.name, "policy": str(pair), "backend": spec.label, "seed": seed, "jobs": len(jobs),
              "jobs_fingerprint": jobs_fingerprint(jobs), "faults": list(trial.faults)}
    # a resumed run runs the whole trial again from t = 0 (docs/trials.md, "Resume"): the journaled
    # jobs load the cluster as they did, and each one's re-run is checked against its journaled record
    if previous is not None:
        previous.check(header, str(folder))
    journal = JournalWriter(folder / JOURNAL, header, previous)
    finished_journal = _FinishedJournal(journal, previous)

    events = open(folder / "events.jsonl", "w", encoding="utf-8")
    decisions = open(folder / "decisions.jsonl", "w", encoding="utf-8")
    resuming = f", re-running {len(previous.rows)} journaled jobs first" if previous is not None else ""
    bar = tqdm(total=len(jobs), desc=f"{pair} ({spec.label}{resuming})", unit="job",
               disable=None if show_progress else True, leave=False, mininterval=0.5)
    coflows = CoflowClock()

    def on_event(ev):
        coflows(ev)
        if log_events:
            events.write(dumps(ev.to_json()) + "\n")
        if isinstance(ev, JobFinished):
            finished_journal(ev.job_id)

    def on_decisions(ev, name, dt, ds):
        decisions.write(dumps({"t": ev.time, "policy": name, "event": ev.kind, "wall_s": dt,
                               "decisions": [d.to_json() for d in ds]}) + "\n")

    last = [0]

    def progress(done, total):
        if done - last[0] >= runner.progress_step or done == total:
            bar.update(done - last[0])
            last[0] = done

    def on_books(books: LiveBooks) -> None:
        finished_journal.books = books

    try:
        res = runner.run(TrialRun(cluster, jobs, policy, netpol, trial, faults, model, speeds, on_event=on_event,
                                    on_decisions=on_decisions if log_decisions else None, progress=progress, on_books=on_books,
                                    profiles=loaded.profiles, seed=seed))
    finally:
        bar.close()
        events.close()
        decisions.close()
        journal.close()
    rows = job_rows(res.records)
    if show_progress:  # one plain line per run, on a terminal or not (the bar above vanishes when done)
        done = sum(r["status"] == "finished" for r in rows)
        print(f"{pair} ({spec.label}): {done} of {len(jobs)} jobs finished, {res.end_time_s:.6g} s "
              f"{runner.clock}, {time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
    columns = list(JOB_COLUMNS) + res.job_columns
    for r in rows:
        r.update(res.job_extra.get(int(r["job_id"]), {}))
    job_stats = getattr(policy, "job_stats", None)
    if callable(job_stats):  # a policy's own per-job columns (e.g. A-SRPT's release from its virtual instance)
        stat_columns, per_job = job_stats()
        columns += [c for c in stat_columns if c not in columns]
        for r in rows:
            own = per_job.get(int(r["job_id"]), {})
            for c in stat_columns:
                r.setdefault(c, own.get(c, ""))
    for name, (file_columns, file_rows) in res.files.items():
        write_csv(folder / name, file_rows, file_columns)
    intervals = list(res.busy_gpu_intervals)
    if previous is not None:  # journaled jobs keep their journaled records verbatim
        kept = {jid: {**row, **previous.extra.get(jid, {})} for jid, row in previous.rows.items()}
        rows = [kept.get(int(r["job_id"]), r) for r in rows]
        intervals = _journaled_intervals(intervals, previous)
    write_csv(folder / "jobs.csv", rows, columns)
    busy = pd.DataFrame(intervals, columns=["job_id", "start_s", "end_s", "gpus"])
    busy.to_csv(folder / "gpu_intervals.csv", index=False)
    meta: dict[str, Any] = dict(
        policy=pair.placement, network_policy=pair.network, backend=spec.name, timing=trial.timing.mode,
        events=res.events, wall_s=time.perf_counter() - t0, seed=seed, trial=trial.name,
        cluster=cluster.name, timing_model=trial.timing.model if trial.timing.mode == "analytic" else "flow",
        policy_params=params_record(policy.get_params()), faults=list(trial.faults),
    )
    if netpol is not None:
        meta["network_policy_params"] = params_record(netpol.get_params())
    meta.update(res.summary)  # the backend's own entries (the emulator's measured timing, its emulation section)
    run_stats = getattr(policy, "run_stats", None)
    if callable(run_stats):
        meta.update(run_stats())  # a policy's own statistics of the run (e.g. GADGET's embedded ratio)
    finished = {int(r["job_id"]) for r in rows if r["status"] == "finished"}
    meta.update(coflows.summary())
    meta.update(utility_summary(jobs, res.iterations_done, finished))
    if previous is not None:
        meta["resumed"], meta["note"] = finished_journal.resume_note(len(jobs), deterministic=res.deterministic)
    summary = summarize(rows, res.decision_times_s, cluster.total_gpus, intervals=busy, **meta)
    typed = res.type_gpu_seconds
    if len(cluster.gpu_types) > 1 and typed and previous is None and summary["makespan_s"] > 0:
        n = cluster.gpus_by_type()
        summary["gpu_utilisation_by_type"] = {t: typed[t] / (n[t] * summary["makespan_s"]) for t in n}
    write_json(folder / "summary.json", summary)
    resolved = loaded.resolved()
    resolved.update({"policy": pair.placement, "network_policy": pair.network, "seed": seed,
                     "backend": spec.name})
    (folder / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")
    if report:
        run_report(folder, cluster.total_gpus)
    return summary


def _journaled_intervals(intervals: list, previous: JournalState) -> list:
    """The re-run's GPU-holding intervals in their order, each journaled job's replaced by its journaled ones."""
    out, done = [], set()
    journaled = {}
    for j, s, e, g in previous.intervals:
        journaled.setdefault(j, []).append((j, s, e, g))
    for iv in intervals:
        if iv[0] not in journaled:
            out.append(iv)
        elif iv[0] not in done:
            out += journaled[iv[0]]
            done.add(iv[0])
    return out + [iv for j in sorted(set(journaled) - done) for iv in journaled[j]]


def _trial_jobs(loaded: LoadedTrial, seed: int) -> list:
    """The trial's jobs as ``run_into`` loads them (for checks before a run)."""
    trial = loaded.trial
    cluster = loaded.cluster_config.build()
    wl = trial.workload.model_dump()
    kind = wl.pop("kind")
    return load_workload(kind, wl, cluster, seed, loaded.base_dir, where=f"{loaded.path or 'trial'}: workload",
                         profiles=loaded.profiles)


def refuse_early(loaded: LoadedTrial, pairs: list[PolicyPair], specs: list["BackendSpec"], seed: int) -> None:
    """ConfigError (one line) if one of ``specs`` cannot honour the trial, before anything runs."""
    jobs = _trial_jobs(loaded, seed) if any(sp.backend.reads_jobs for sp in specs) else None
    for sp in specs:
        # a backend refuses before the run instead of ignoring a decision kind or a job's traffic
        refusal = sp.backend.refusal(sp.apply(loaded).trial, [p.network for p in pairs if p.network], jobs, None)
        if refusal:
            raise ConfigError(refusal)


def simulate_into(folder: Path, loaded: LoadedTrial, pair: PolicyPair, seed: int, show_progress: bool = True,
                  log_events: bool = True, report: bool = True) -> dict[str, Any]:
    """Simulate one policy pair into ``folder`` (the ``sim`` backend of :func:`run_into`)."""
    return run_into(folder, loaded, pair, seed, BackendSpec("sim"), show_progress, log_events, report)


def _marker(command: str, loaded: LoadedTrial, policies: list[str], seed: int, backend: BackendSpec,
            inject: list[str] | None) -> dict[str, Any]:
    return {"command": command, "trial": str(loaded.path.resolve()) if loaded.path else None,
            "policies": policies, "seed": seed, "backend": backend.name + (f":{backend.mode}" if backend.mode else ""),
            "inject": list(inject or [])}


def read_resumable(folder: Path) -> dict[str, Any]:
    """The ``RESUMABLE.json`` marker of an interrupted results folder (one-line error if absent)."""
    p = Path(folder) / RESUMABLE
    if not p.is_file():
        done = (Path(folder) / "summary.json").exists() or (Path(folder) / "comparison.csv").exists()
        why = "it is complete" if done else f"it has no {RESUMABLE} (not an interrupted trial)"
        raise RaytestbedError(f"--resume {folder}: cannot resume: {why}")
    return json.loads(p.read_text(encoding="utf-8"))


def run(loaded: LoadedTrial, out: Path, policy: str | None = None, seed: int | None = None,
        force: bool = False, show_progress: bool = True, log_events: bool = True,
        backend: str | BackendSpec | None = None, inject: list[str] | None = None,
        resume: bool = False, report: bool = True) -> dict[str, Any]:
    """``raytestbed run``: one policy (pair) into ``out``; returns the summary.

    ``inject``: extra faults (``kill_server:1@120s``); ``resume``: continue the interrupted run in ``out``;
    ``report``: write ``report.md`` and its plots.
    """
    loaded = with_faults(loaded, inject)
    trial = loaded.trial
    pair = PolicyPair.parse(policy or trial.policy, None if policy else trial.network_policy)
    s = trial.seed if seed is None else seed
    spec = _as_spec(backend, loaded)
    refuse_early(loaded, [pair], [spec], s)
    previous = read_journal(Path(out) / JOURNAL) if resume else None
    marker = _marker("run", loaded, [str(pair)], s, spec, inject)
    with ResultsFolder(out, force=force or resume, resumable=marker) as rf:
        return run_into(rf.path, loaded, pair, s, spec, show_progress, log_events, report, previous=previous)


def compare_into(path: Path, loaded: LoadedTrial, pairs: list[PolicyPair], seed: int,
                 backend: BackendSpec, show_progress: bool = True, previous_dir: Path | None = None,
                 report: bool = True) -> pd.DataFrame:
    """Run each policy pair into ``path/<pair>/`` and write ``comparison.csv``, ``comparison.png``, ``report.md``.

    ``previous_dir``: an interrupted compare folder; policies it completed are copied, a policy it
    interrupted resumes from its journal. ``report``: False writes only ``comparison.csv`` (no plots).
    """
    rows = []
    olds = [previous_dir / policy_folder(str(pair)) if previous_dir is not None else None for pair in pairs]
    done = [old is not None and (old / "summary.json").is_file() for old in olds]
    # several runs to go: the backend's shared part (the emulator's Ray) is started once for all of them
    shared = (backend.backend.session(backend.apply(loaded).trial, loaded.cluster_config.build())
              if done.count(False) > 1 and backend.backend.missing() is None else contextlib.nullcontext())
    with shared:
        for pair, old, finished in zip(pairs, olds, done):
            sub = path / policy_folder(str(pair))
            if finished:
                shutil.copytree(old, sub)
                summary = json.loads((sub / "summary.json").read_text(encoding="utf-8"))
            else:
                prev = read_journal(old / JOURNAL) if old is not None and (old / JOURNAL).is_file() else None
                summary = run_into(sub, loaded, pair, seed, backend, show_progress, report=False, previous=prev)
            rows.append(summary)
    names = [str(p) for p in pairs]
    cols = [k for k in SUMMARY_KEYS if any(k in r for r in rows)]
    df = pd.DataFrame(rows)[cols]
    df["policy"] = names
    df["rank"] = ranks(df)  # by total JCT; empty for a policy that left jobs unfinished
    df.to_csv(path / "comparison.csv", index=False)
    if not report:
        return df
    comparison_bars(df, path / "comparison.png",
                    title=f"{loaded.trial.name} ({loaded.cluster_config.name}, {backend.label})")
    compare_report(path)
    return df


def with_workload_history(policy: str, params: dict[str, Any], jobs: list, search: list[Path] = ()) -> dict[str, Any]:
    """``params`` plus ``history`` = the workload's predictor-training rows, when it has some.

    A trace workload with ``history_jobs`` (raytestbed/traces/asrpt_workload.py, step 6)
    returns the (group, user, iterations) rows of the trace jobs *before* the job set; every
    policy whose constructor takes ``history`` (A-SRPT and its baselines) gets them, unless
    the trial's ``policy_params`` set ``history`` itself.
    """
    rows = getattr(jobs, "predictor_history", None)
    if not rows or "history" in params:
        return params
    cls = policy_class(policy, search)
    if "history" not in inspect.signature(cls.__init__).parameters:
        return params
    return {**params, "history": rows}


def _pairs(loaded: LoadedTrial, policies: list[str]) -> list[PolicyPair]:
    trial = loaded.trial
    pairs = [PolicyPair.parse(p, trial.network_policy) for p in policies]
    names = [str(p) for p in pairs]
    if len(set(names)) != len(names):
        raise ConfigError(f"--policies lists a policy twice: {', '.join(names)}")
    search = [loaded.base_dir]
    cluster = loaded.cluster_config.build()
    for p in pairs:  # fail on an unknown or broken policy, or one the cluster does not suit, before anything runs
        pol = make_policy(p.placement, "placement", trial.seed, search, **trial.policy_params.get(p.placement, {}))
        check_identical_servers(p.placement, type(pol), cluster)
        if p.network:
            net = make_policy(p.network, "network", trial.seed, search, **trial.policy_params.get(p.network, {}))
            check_identical_servers(p.network, type(net), cluster)
    return pairs


def compare(loaded: LoadedTrial, out: Path, policies: list[str], seed: int | None = None,
            force: bool = False, show_progress: bool = True, backend: str | BackendSpec | None = None,
            inject: list[str] | None = None, resume: bool = False, report: bool = True) -> pd.DataFrame:
    """``raytestbed compare``: several policies on the same jobs; one sub-folder each plus
    ``comparison.csv`` and ``comparison.png`` (``report``: and the reports)."""
    loaded = with_faults(loaded, inject)
    pairs = _pairs(loaded, policies)
    s = loaded.trial.seed if seed is None else seed
    spec = _as_spec(backend, loaded)
    refuse_early(loaded, pairs, [spec], s)
    marker = _marker("compare", loaded, [str(p) for p in pairs], s, spec, inject)
    if resume:
        # move the interrupted folder aside: the new run copies what it finished
        prev_dir = Path(out).with_name(Path(out).name + ".resuming")
        if prev_dir.exists():
            shutil.rmtree(prev_dir)
        Path(out).rename(prev_dir)
        try:
            with ResultsFolder(out, force=True, resumable=marker) as rf:
                df = compare_into(rf.path, loaded, pairs, s, spec, show_progress, previous_dir=prev_dir,
                                  report=report)
        except BaseException:
            if Path(out).exists():
                shutil.rmtree(prev_dir, ignore_errors=True)  # the new interrupted folder holds everything
            else:
                prev_dir.rename(out)  # nothing new was kept: put the interrupted folder back
            raise
        shutil.rmtree(prev_dir, ignore_errors=True)
        return df
    with ResultsFolder(out, force=force, resumable=marker) as rf:
        return compare_into(rf.path, loaded, pairs, s, spec, show_progress, report=report)


def parity_check(loaded: LoadedTrial, out: Path, policies: list[str], backends: tuple[str, str] = ("sim", "emu"),
                 seed: int | None = None, limit: float = 0.10, force: bool = False, show_progress: bool = True,
                 inject: list[str] | None = None) -> dict[str, Any]:
    """``raytestbed parity``: the same trial, seed, jobs and policies on two backends.

    Writes ``out/<backend a>/`` and ``out/<backend b>/`` (compare folders), then ``parity.csv``,
    ``parity_jobs.csv`` and ``parity.md`` (:mod:`raytestbed.results.parity`); returns the parity result.
    """
    if not 0 < limit < 10:
        raise ConfigError(f"--limit {limit}: give a relative limit such as 0.10")
    loaded = with_faults(loaded, inject)
    pairs = _pairs(loaded, policies)
    specs = [BackendSpec.parse(b) for b in backends]
    if len(specs) != 2 or specs[0].label == specs[1].label:
        raise ConfigError(f"--backends {','.join(backends)}: give two different backends, e.g. sim,emu")
    s = loaded.trial.seed if seed is None else seed
    refuse_early(loaded, pairs, specs, s)
    with ResultsFolder(out, force=force) as rf:
        for spec in specs:
            (rf.path / spec.label).mkdir()
            compare_into(rf.path / spec.label, loaded, pairs, s, spec, show_progress)
        res = parity(rf.path / specs[0].label, rf.path / specs[1].label, limit=limit,
                     a_name=specs[0].label.replace("-", "_"), b_name=specs[1].label.replace("-", "_"))
        md = write_parity(res, rf.path, specs[0].label.replace("-", "_"), specs[1].label.replace("-", "_"))
        with open(md, "a", encoding="utf-8") as f:
            f.write("\nPer-backend reports (summary table, JCT CDF, GPU utilisation, Gantt, decision latency): "
                    + ", ".join(f"[{sp.label}]({sp.label}/report.md)" for sp in specs) + "\n")
    res["a"], res["b"] = specs[0].label, specs[1].label
    return res
