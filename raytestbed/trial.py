"""Run a trial: build cluster, jobs and policies from a trial file, simulate, write results.

Used by ``raytestbed run`` and ``raytestbed compare`` (see :mod:`raytestbed.cli`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm import tqdm

from raytestbed.config import LoadedTrial
from raytestbed.core.timing import make_iteration_model
from raytestbed.errors import ConfigError
from raytestbed.results.plots import comparison_bars
from raytestbed.results.report import compare_report, run_report
from raytestbed.results.records import JOB_COLUMNS, SUMMARY_KEYS, job_rows, summarize
from raytestbed.results.writer import ResultsFolder, dumps, write_csv, write_json
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Fault, Simulator
from raytestbed.traces.registry import load_workload

_FAULT = re.compile(r"^(kill_server):(\d+)@([0-9.]+)s?$")


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
    """``kill_server:1@120s`` -> Fault(kill_server, 1, 120.0)."""
    m = _FAULT.match(text.strip())
    if not m:
        raise ConfigError(f"fault {text!r}: expected the form 'kill_server:SERVER@SECONDSs'")
    return Fault(m.group(1), int(m.group(2)), float(m.group(3)))


def simulate_into(
    folder: Path,
    loaded: LoadedTrial,
    pair: PolicyPair,
    seed: int,
    show_progress: bool = True,
    log_events: bool = True,
    report: bool = True,
) -> dict[str, Any]:
    """Simulate one policy pair and write its results files into ``folder``; return the summary."""
    t0 = time.perf_counter()
    trial = loaded.trial
    folder.mkdir(parents=True, exist_ok=True)
    cluster = loaded.cluster_config.build()
    wl = trial.workload.model_dump()
    kind = wl.pop("kind")
    jobs = load_workload(kind, wl, cluster, seed, loaded.base_dir, where=f"{loaded.path or 'trial'}: workload")
    params = trial.policy_params
    policy = make_policy(pair.placement, "placement", seed, **params.get(pair.placement, {}))
    netpol = None
    if pair.network is not None:
        netpol = make_policy(pair.network, "network", seed, **params.get(pair.network, {}))
        if trial.timing.mode != "flow":
            raise ConfigError(f"network policy {pair.network!r} needs timing.mode: flow (the trial says "
                              f"{trial.timing.mode!r})")
    try:
        model = make_iteration_model(trial.timing.model, **trial.timing.model_params)
    except TypeError as e:
        raise ConfigError(f"timing.model_params: {e}") from None
    faults = [parse_fault(f) for f in trial.faults]
    for f in faults:
        if f.target >= cluster.num_servers:
            raise ConfigError(f"fault {f.kind}:{f.target}: the cluster has servers 0..{cluster.num_servers - 1}")

    events = open(folder / "events.jsonl", "w", encoding="utf-8")
    decisions = open(folder / "decisions.jsonl", "w", encoding="utf-8")
    bar = tqdm(total=len(jobs), desc=str(pair), unit="job", disable=None if show_progress else True,
               leave=False, mininterval=0.5)

    def on_event(ev):
        if log_events:
            events.write(dumps(ev.to_json()) + "\n")

    def on_decisions(ev, name, dt, ds):
        decisions.write(dumps({"t": ev.time, "policy": name, "event": ev.kind, "wall_s": dt,
                               "decisions": [d.to_json() for d in ds]}) + "\n")

    last = [0]

    def progress(done, total):
        if done - last[0] >= 50 or done == total:
            bar.update(done - last[0])
            last[0] = done

    try:
        sim = Simulator(cluster, jobs, policy, netpol, mode=trial.timing.mode, model=model,
                        iterations_per_coflow=trial.timing.iterations_per_coflow, faults=faults,
                        on_event=on_event, on_decisions=on_decisions, progress=progress)
        res = sim.run()
    finally:
        bar.close()
        events.close()
        decisions.close()
    rows = job_rows(res.records)
    write_csv(folder / "jobs.csv", rows, JOB_COLUMNS)
    pd.DataFrame(res.busy_gpu_intervals, columns=["job_id", "start_s", "end_s", "gpus"]).to_csv(
        folder / "gpu_intervals.csv", index=False)
    summary = summarize(
        rows, res.decision_times_s, cluster.total_gpus,
        policy=pair.placement, network_policy=pair.network, backend="sim", timing=trial.timing.mode,
        events=res.events, wall_s=time.perf_counter() - t0, seed=seed, trial=trial.name,
        cluster=cluster.name, timing_model=trial.timing.model if trial.timing.mode == "analytic" else "flow",
        policy_params=policy.params(),
    )
    write_json(folder / "summary.json", summary)
    resolved = loaded.resolved()
    resolved.update({"policy": pair.placement, "network_policy": pair.network, "seed": seed})
    (folder / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")
    if report:
        run_report(folder, cluster.total_gpus)
    return summary


def run(loaded: LoadedTrial, out: Path, policy: str | None = None, seed: int | None = None,
        force: bool = False, show_progress: bool = True, log_events: bool = True) -> dict[str, Any]:
    """``raytestbed run``: one policy (pair) into ``out``; returns the summary."""
    trial = loaded.trial
    pair = PolicyPair.parse(policy or trial.policy, None if policy else trial.network_policy)
    with ResultsFolder(out, force=force) as rf:
        return simulate_into(rf.path, loaded, pair, trial.seed if seed is None else seed, show_progress, log_events)


def compare(loaded: LoadedTrial, out: Path, policies: list[str], seed: int | None = None,
            force: bool = False, show_progress: bool = True) -> pd.DataFrame:
    """``raytestbed compare``: several policies on the same jobs; one sub-folder each plus
    ``comparison.csv`` and ``comparison.png``."""
    trial = loaded.trial
    pairs = [PolicyPair.parse(p, trial.network_policy) for p in policies]
    names = [str(p) for p in pairs]
    if len(set(names)) != len(names):
        raise ConfigError(f"--policies lists a policy twice: {', '.join(names)}")
    s = trial.seed if seed is None else seed
    with ResultsFolder(out, force=force) as rf:
        rows = []
        for pair in pairs:
            summary = simulate_into(rf.path / str(pair), loaded, pair, s, show_progress, report=False)
            rows.append(summary)
        cols = [k for k in SUMMARY_KEYS if k in rows[0]]
        df = pd.DataFrame(rows)[cols]
        df["policy"] = names
        df.to_csv(rf.path / "comparison.csv", index=False)
        comparison_bars(df, rf.path / "comparison.png", title=f"{trial.name} ({loaded.cluster_config.name})")
        compare_report(rf.path)
    return df
