"""Parity between two compare folders (here: analytic vs flow-level timing of the simulator)."""

from pathlib import Path

import pandas as pd
import pytest

from raytestbed.cli import main
from raytestbed.results.parity import parity, write_parity


def _trial(tmp_path, mode, name):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"""
cluster: laptop.yaml
seed: 2
workload: {{kind: synthetic, jobs: 10, iterations: [20, 60], models: [resnet50, gnmt], comm_mix: {{rar: 1}}}}
timing: {{mode: {mode}, iterations_per_coflow: 4}}
""")
    return p


def test_identical_folders_pass_and_perturbed_fail(tmp_path):
    t = _trial(tmp_path, "analytic", "a")
    assert main(["compare", str(t), "--policies", "fifo", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    res = parity(tmp_path / "a", tmp_path / "a", limit=0.1)
    assert res["passed"] and res["policies"]["total_jct_rel_diff"].abs().max() == 0.0
    # a copy with every JCT 20% longer must fail the 10% limit
    b = tmp_path / "b"
    (b / "fifo").mkdir(parents=True)
    cmp = pd.read_csv(tmp_path / "a" / "comparison.csv")
    cmp["total_jct_s"] *= 1.2
    cmp.to_csv(b / "comparison.csv", index=False)
    jobs = pd.read_csv(tmp_path / "a" / "fifo" / "jobs.csv")
    jobs["jct_s"] *= 1.2
    # one job iterates 10 % slower in the same placement
    jobs.loc[0, "finish_s"] = jobs.loc[0, "first_start_s"] + 1.1 * (jobs.loc[0, "finish_s"] - jobs.loc[0, "first_start_s"])
    jobs.to_csv(b / "fifo" / "jobs.csv", index=False)
    res = parity(tmp_path / "a", b, limit=0.1, a_name="sim", b_name="perturbed")
    assert not res["passed"]
    assert res["policies"]["total_jct_rel_diff"].iloc[0] == pytest.approx(0.2)
    assert res["jobs"]["rel_diff"].to_numpy() == pytest.approx(0.2)
    md = write_parity(res, tmp_path, "sim", "perturbed")
    text = md.read_text()
    assert "FAIL" in text
    # per job: both sides' placement, start and iteration time, and the largest differences first
    j = res["jobs"]
    assert j["same_placement"].all()
    assert j["diff_s"].to_numpy() == pytest.approx((0.2 * jobs["jct_s"] / 1.2).to_numpy())
    assert {"first_start_s_sim", "first_start_s_perturbed", "mean_iteration_s_sim", "model"} <= set(j.columns)
    table = text.split("## Largest per-job differences")[1]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| job_id")]
    assert len(rows) == 5
    biggest = int(jobs.loc[jobs["jct_s"].idxmax(), "job_id"])
    assert rows[0].startswith(f"| {biggest} |")
    assert f"| {jobs.loc[jobs['jct_s'].idxmax(), 'placement']} | True |" in rows[0]
    # the total difference split by where it comes from: job 0 iterates at another speed, the rest do not
    d = 0.2 * jobs["jct_s"] / 1.2
    want = (f"Total JCT difference {d.sum():+,.1f} s = {d[0]:+,.1f} s (1 job) from jobs in the same placement "
            f"iterating more than 1% apart, +0.0 s (0 jobs) from jobs placed differently, "
            f"{d[1:].sum():+,.1f} s (9 jobs) from the others")
    assert want in text


def test_a_pipeline_placement_stays_one_markdown_cell():
    from raytestbed.results.tables import md_table

    row = md_table(pd.DataFrame({"placement": ["s0:0x1|s1:1x2"], "t": [0.1234567]}), digits=6).splitlines()[-1]
    assert row == "| s0:0x1\\|s1:1x2 | 0.123457 |"


def test_analytic_vs_flow_timing_runs(tmp_path):
    for mode in ("analytic", "flow"):
        t = _trial(tmp_path, mode, mode)
        assert main(["compare", str(t), "--policies", "fifo", "--out", str(tmp_path / mode), "--quiet"]) == 0
    res = parity(tmp_path / "analytic", tmp_path / "flow", limit=0.1)
    assert len(res["jobs"]) == 10
    assert res["ranking_agrees"]  # one policy: trivially the same ranking


def test_rankings_agree_treats_ties_as_compatible():
    from raytestbed.results.parity import rankings_agree

    assert rankings_agree({"a": 1.0, "b": 2.0}, {"a": 5.0, "b": 9.0})
    assert not rankings_agree({"a": 1.0, "b": 2.0}, {"a": 9.0, "b": 5.0})
    assert rankings_agree({"a": 3.0, "b": 3.0, "c": 1.0}, {"a": 4.0, "b": 2.0, "c": 1.0})  # tie in a
    assert not rankings_agree({"a": 3.0, "b": 3.0, "c": 1.0}, {"a": 4.0, "b": 2.0, "c": 3.0})  # c moved
