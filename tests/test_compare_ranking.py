"""``compare`` never ranks a policy that left jobs unfinished, reports ties as ties; a run with unfinished jobs
says so (terminal and summary.json); ``parity`` fails on a job finished on one backend only."""

import json
from pathlib import Path

import pandas as pd

from raytestbed.cli import main
from raytestbed.results.parity import parity
from raytestbed.results.ranking import ranks, summary_line

PLUGINS = '''
from raytestbed import Policy
from raytestbed.schedulers.fifo import FifoPolicy


class Idle(Policy):
    """Never starts a job."""
    role = "placement"

    def on_event(self, event, view):
        return []


class Fifo2(FifoPolicy):
    """FIFO under another name: the same decisions, the same total JCT."""
'''


def _trial(tmp_path: Path) -> Path:
    (tmp_path / "plugs.py").write_text(PLUGINS)
    t = tmp_path / "t.yaml"
    t.write_text("cluster: laptop.yaml\nworkload: {kind: synthetic, jobs: 6, iterations: [20, 50]}\n")
    return t


def test_a_policy_that_finishes_nothing_is_not_ranked_and_compare_exits_1(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", str(_trial(tmp_path)), "--policies", "plugs:Idle,fifo", "--out", str(out), "--quiet"])
    cap = capsys.readouterr()
    assert code == 1, cap.err
    assert "Lowest total JCT: fifo; not ranked (jobs unfinished): plugs:Idle (6 of 6 jobs unfinished)" in cap.out
    assert "not ranked: 6 jobs unfinished" in cap.out  # the table marks it
    df = pd.read_csv(out / "comparison.csv")
    assert df.set_index("policy").loc["plugs:Idle", "unfinished"] == 6
    assert pd.isna(df.set_index("policy").loc["plugs:Idle", "rank"]) and df.set_index("policy").loc["fifo", "rank"] == 1
    report = (out / "report.md").read_text()
    assert "Lowest total JCT: fifo;" in report and "**plugs:Idle**" not in report
    s = json.loads((out / "plugs.Idle" / "summary.json").read_text())
    assert s["unfinished"] == 6 and s["unfinished_jobs"] == [0, 1, 2, 3, 4, 5]


def test_equal_totals_are_reported_as_a_tie(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(_trial(tmp_path)), "--policies", "fifo,plugs:Fifo2", "--out", str(out),
                 "--quiet"]) == 0
    cap = capsys.readouterr()
    assert "Lowest total JCT: fifo and plugs:Fifo2 (tie)" in cap.out
    assert "1 (tie)" in cap.out
    assert "Lowest total JCT: fifo and plugs:Fifo2 (tie)" in (out / "report.md").read_text()


def test_python_comparison_has_unfinished_and_rank_columns(tmp_path, monkeypatch):
    import raytestbed as rtb

    monkeypatch.syspath_prepend(str(tmp_path))
    cmp = rtb.compare(_trial(tmp_path), ["plugs:Idle", "fifo"])
    t = cmp.table.set_index("policy")
    assert t.loc["plugs:Idle", "unfinished"] == 6 and pd.isna(t.loc["plugs:Idle", "rank"])
    assert t.loc["fifo", "unfinished"] == 0 and t.loc["fifo", "rank"] == 1


def test_run_with_unfinished_jobs_says_so(tmp_path, capsys):
    out = tmp_path / "r"
    code = main(["run", str(_trial(tmp_path)), "--policy", "plugs:Idle", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "6 of 6 jobs unfinished (jobs 0, 1, 2, 3, 4, 5;" in err


def test_summary_line_ranks_only_complete_policies():
    df = pd.DataFrame({"policy": ["a", "b", "c"], "jobs": [4, 4, 4], "finished": [4, 3, 4],
                       "unfinished": [0, 1, 0], "total_jct_s": [10.0, 1.0, 10.0 * (1 + 1e-12)]})
    assert ranks(df).tolist()[0] == 1 and pd.isna(ranks(df)[1]) and ranks(df)[2] == 1
    assert summary_line(df) == "Lowest total JCT: a and c (tie); not ranked (jobs unfinished): b (1 of 4 jobs unfinished)"


def _side(folder: Path, statuses: list[str]) -> None:
    folder.mkdir(parents=True)
    rows = [{"job_id": i, "status": st, "arrival_s": 0.0, "first_start_s": 0.0,
             "finish_s": 10.0 if st == "finished" else float("nan"), "jct_s": 10.0 if st == "finished" else float("nan"),
             "iterations": 10, "placement": "s0:g0"} for i, st in enumerate(statuses)]
    (folder / "p").mkdir()
    pd.DataFrame(rows).to_csv(folder / "p" / "jobs.csv", index=False)
    fin = sum(st == "finished" for st in statuses)
    pd.DataFrame([{"policy": "p", "jobs": len(statuses), "finished": fin, "unfinished": len(statuses) - fin,
                   "total_jct_s": 10.0 * fin, "makespan_s": 10.0}]).to_csv(folder / "comparison.csv", index=False)


def test_parity_fails_on_a_job_unfinished_on_one_side(tmp_path):
    _side(tmp_path / "a", ["finished"] * 12)
    _side(tmp_path / "b", ["finished"] * 11 + ["unfinished"])
    # total JCT 120 vs 110 s is within a 10 % limit, and the makespans are equal: only job 11 tells
    res = parity(tmp_path / "a", tmp_path / "b", limit=0.10, a_name="sim", b_name="emu")
    row = res["policies"].iloc[0]
    assert row["unfinished_sim"] == 0 and row["unfinished_emu"] == 1 and row["unfinished_one_side"] == "11"
    assert not row["within_limit"] and not res["passed"]
    _side(tmp_path / "c", ["finished"] * 12)
    assert parity(tmp_path / "a", tmp_path / "c", limit=0.10)["passed"]


def test_plugin_policy_folders_have_no_colon(tmp_path):
    out = tmp_path / "cmp"
    assert main(["compare", str(_trial(tmp_path)), "--policies", "fifo,plugs:Fifo2", "--out", str(out),
                 "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["fifo", "plugs.Fifo2"]
    assert "(plugs.Fifo2/report.md)" in (out / "report.md").read_text()
