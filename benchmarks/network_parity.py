"""Network policies, emulator against flow simulator, in one process (diagnostic).

``raytestbed bench network-parity TRIAL.yaml --policies fifo+parrot,fifo+aalo [--limit 1e-6]`` runs each
policy pair of a flow-timed trial twice: in the flow simulator (the trial's ``timing`` section) and on
the emulator's clock service with in-process workers (no Ray processes, replayed compute, fast-forward
off). The same policy objects get the same flow table on both (docs/architecture.md, "Bytes from
anchors"), so they must make the same decisions at the same times. Per pair it prints total JCT on
both, the relative difference, the largest per-job difference, the SetFlowRates / SetFlowWeights
counts on both, the largest difference of the decision times (when both logs hold the same kinds in
the same order) and CPU seconds of each side; exit 1 if a pair differs by more than ``--limit``
(relative, total JCT and every job) or in its decision counts. ``raytestbed parity`` runs the same
comparison through Ray.

    raytestbed bench network-parity workloads/trials/parity_rar_nic.yaml --policies fifo+parrot,fifo+aalo
"""

from __future__ import annotations

import argparse
import time

from raytestbed.config import load_trial
from raytestbed.core.job import admit_in_epochs
from raytestbed.emu.clock_actor import run_in_process
from raytestbed.emu.fastforward import FastForward
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload
from raytestbed.trial import PolicyPair, trial_speeds

_KINDS = ("SetFlowRates", "SetFlowWeights")


def _network_log(decisions) -> list[tuple[float, str]]:
    """(time, kind) of every network decision, in order."""
    return [(ev.time, type(d).__name__) for ev, _, _, ds in decisions for d in ds if type(d).__name__ in _KINDS]


def compare_pair(path: str, policy: str) -> dict:
    """One policy pair on both backends: JCTs per job (s), network decision logs and CPU seconds."""
    loaded = load_trial(path)
    trial = loaded.trial
    cluster = loaded.cluster_config.build()
    wl = trial.workload.model_dump()
    kind = wl.pop("kind")

    def jobs():
        return admit_in_epochs(load_workload(kind, wl, cluster, trial.seed, loaded.base_dir, where=f"{path}: workload",
                                             profiles=loaded.profiles),
                               trial.timing.admission_epoch_s)

    pair = PolicyPair.parse(policy, trial.network_policy)
    params, search = trial.policy_params, [loaded.base_dir]

    def policies():
        out = [make_policy(pair.placement, "placement", trial.seed, search, **params.get(pair.placement, {}))]
        if pair.network:
            out.append(make_policy(pair.network, "network", trial.seed, search, **params.get(pair.network, {})))
        return out

    speeds = trial_speeds(loaded, cluster, jobs())
    t = trial.timing
    sim_dec: list = []
    c0 = time.process_time()
    pols = policies()
    sim = Simulator(cluster, jobs(), pols[0], pols[1] if len(pols) > 1 else None, mode="flow",
                    iterations_per_coflow=t.iterations_per_coflow, schedule=t.schedule, until_s=t.until_s,
                    speeds=speeds, restore_s=t.restore_s, fast_forward=False,
                    on_decisions=lambda ev, name, dt, ds: sim_dec.append((ev, name, dt, list(ds)))).run()
    c1 = time.process_time()
    res, _, emu_dec, _ = run_in_process(cluster, jobs(), policies(), fast_forward=FastForward(enabled=False),
                                        speeds=speeds, restore_s=t.restore_s)
    c2 = time.process_time()
    return {"sim": {r.job.job_id: r.finish_s - r.job.arrival_s for r in sim.records},
            "emu": {j: r.finish_s - r.job.arrival_s for j, r in res["records"].items()},
            "sim_log": _network_log(sim_dec), "emu_log": _network_log(emu_dec),
            "cpu_sim_s": c1 - c0, "cpu_emu_s": c2 - c1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench network-parity", description=__doc__.splitlines()[0])
    ap.add_argument("trial", help="a flow-timed trial YAML")
    ap.add_argument("--policies", required=True, help="comma-separated policy pairs, e.g. fifo+parrot,fifo+aalo")
    ap.add_argument("--limit", type=float, default=1e-6, help="relative limit on total JCT and every job (1e-6)")
    args = ap.parse_args(argv)
    bad = 0
    for pol in args.policies.split(","):
        r = compare_pair(args.trial, pol)
        s, e = r["sim"], r["emu"]
        ts, te = sum(s.values()), sum(e.values())
        missing = sorted(set(s) ^ set(e))
        worst = max((j for j in s if j in e), key=lambda j: abs(e[j] - s[j]))
        counts = {k: (sum(x[1] == k for x in r["sim_log"]), sum(x[1] == k for x in r["emu_log"])) for k in _KINDS}
        same_kinds = [k for _, k in r["sim_log"]] == [k for _, k in r["emu_log"]]
        dt = max((abs(a[0] - b[0]) for a, b in zip(r["sim_log"], r["emu_log"])), default=0.0)
        ok = (not missing and abs(te - ts) <= args.limit * ts and same_kinds
              and all(abs(e[j] - s[j]) <= args.limit * max(s[j], 1e-9) for j in s))
        bad += not ok
        print(f"{pol}: total JCT sim {ts:.9g} s, emu {te:.9g} s ({(te - ts) / ts:+.2g}); largest job diff: job {worst} "
              f"{e[worst] - s[worst]:+.3g} s; SetFlowRates {counts['SetFlowRates'][0]} / {counts['SetFlowRates'][1]}, "
              f"SetFlowWeights {counts['SetFlowWeights'][0]} / {counts['SetFlowWeights'][1]}; decision times "
              + (f"max diff {dt:.2g} s" if same_kinds else "differ in kind or order")
              + (f"; jobs on one side only: {missing}" if missing else "")
              + f"; CPU sim {r['cpu_sim_s']:.1f} s, emu {r['cpu_emu_s']:.1f} s -> {'PASS' if ok else 'FAIL'}",
              flush=True)
    return 1 if bad else 0
