"""Each paper's objective in every summary: GADGET total utility, coflow CCTs, ratio to the lower bound."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from raytestbed.cli import main
from raytestbed.config import load_trial
from raytestbed.core.timing import GadgetModel
from raytestbed.placement.utility import total_utility
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload

REPO = Path(__file__).resolve().parents[1]

GADGET = """
name: g
seed: 3
cluster: gadget_fattree_50.yaml
workload: {kind: gadget, jobs: 40, slots: 10, slot_s: 60}
policy: gadget
policy_params: {gadget: {slot_s: 60}, drf: {slot_s: 60}}
timing: {mode: analytic, model: gadget, until_s: 600}
"""


def test_gadget_total_utility_at_the_horizon_matches_a_direct_simulation(tmp_path):
    trial = tmp_path / "g.yaml"
    trial.write_text(GADGET)
    out = tmp_path / "cmp"
    assert main(["compare", str(trial), "--policies", "gadget,drf", "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "comparison.csv")
    assert "total_utility" in df.columns and "total_utility" in (out / "report.md").read_text()
    loaded = load_trial(trial)
    cluster = loaded.cluster_config.build()
    for name in ("gadget", "drf"):
        jobs = load_workload("gadget", dict(jobs=40, slots=10, slot_s=60), cluster, 3, REPO)
        pol = make_policy(name, "placement", 3, slot_s=60)
        res = Simulator(cluster, jobs, pol, model=GadgetModel(), until_s=600).run()
        expect = total_utility(jobs, res.iterations_done)
        got = float(df.loc[df["policy"] == name, "total_utility"].iloc[0])
        assert got == pytest.approx(expect, rel=1e-12) and got > 0
    s = json.loads((out / "gadget" / "summary.json").read_text())
    assert s["unfinished"] > 0  # the horizon cut the run: utility is taken at T, not at the end


def test_flow_runs_report_cct_and_ratio_to_lower_bound(tmp_path):
    out = tmp_path / "r"
    assert main(["run", str(REPO / "workloads" / "trials" / "demo_flow.yaml"), "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["coflows"] > 0 and 0 < s["avg_cct_s"] <= s["p95_cct_s"]
    assert s["ratio_to_lb"] == pytest.approx(s["total_jct_s"] / s["total_lower_bound_s"]) and s["ratio_to_lb"] >= 1
    # the CCTs are the coflow start -> finish gaps of the event log
    starts, ccts = {}, []
    for line in (out / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        key = (e.get("job"), tuple(e.get("coflow") or ()))
        if e["event"] == "CoflowStarted":
            starts[key] = e["t"]
        elif e["event"] == "CoflowFinished":
            ccts.append(e["t"] - starts.pop(key))
    assert s["coflows"] == len(ccts) and s["avg_cct_s"] == pytest.approx(np.mean(ccts))
    assert "total_utility" not in s  # synthetic jobs carry no GADGET utility


def test_until_s_is_refused_on_the_emulator(tmp_path):
    from raytestbed.emu.backend import emulator_missing
    from raytestbed.errors import ConfigError
    from raytestbed.trial import PolicyPair, run_into

    if emulator_missing():
        pytest.skip("emulator not available")
    trial = tmp_path / "g.yaml"
    trial.write_text(GADGET)
    with pytest.raises(ConfigError, match="until_s"):
        run_into(tmp_path / "x", load_trial(trial), PolicyPair("gadget"), 1, "emu", show_progress=False)
