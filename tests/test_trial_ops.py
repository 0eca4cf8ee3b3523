"""Backend-independent trial operations: parity CLI, fault injection, interrupt + resume (simulator)."""

import json
from pathlib import Path

import pandas as pd
import pytest

import raytestbed.sim.engine as engine
from raytestbed.cli import main
from raytestbed.results.journal import read_journal


def _trial(tmp_path: Path, name="t.yaml", jobs=12, comm="rar", mode="analytic") -> Path:
    p = tmp_path / name
    p.write_text(f"""
cluster: laptop.yaml
seed: 3
workload: {{kind: synthetic, jobs: {jobs}, mean_interarrival_s: 20, iterations: [50, 400],
           models: [resnet50, vgg16], gpu_mix: {{1: 0.3, 2: 0.4, 4: 0.3}}, comm_mix: {{{comm}: 1}}}}
timing: {{mode: {mode}, iterations_per_coflow: 10}}
""")
    return p


# ---------------------------------------------------------------- parity


def test_parity_cli_reports_and_exit_status(tmp_path, capsys):
    t = _trial(tmp_path, comm="ps")  # (ring jobs inside one server take eq. 7's time in flow timing too)
    out = tmp_path / "par"
    rc = main(["parity", str(t), "--out", str(out), "--policies", "fifo", "--backends", "sim:analytic,sim:flow",
               "--limit", "0.5", "--quiet"])
    df = pd.read_csv(out / "parity.csv")
    a = pd.read_csv(out / "sim-analytic" / "comparison.csv")
    b = pd.read_csv(out / "sim-flow" / "comparison.csv")
    # the reported difference is the one between the two compare folders
    want = (b["total_jct_s"][0] - a["total_jct_s"][0]) / a["total_jct_s"][0]
    assert df["total_jct_rel_diff"][0] == pytest.approx(want)
    assert want != 0.0  # two timing models really differ
    passed = abs(want) <= 0.5 and abs(df["makespan_rel_diff"][0]) <= 0.5
    assert rc == (0 if passed else 1)
    md = (out / "parity.md").read_text()
    assert ("PASS" if passed else "FAIL") in md and "(sim-flow/report.md)" in md
    assert (out / "sim-flow" / "report.md").is_file()
    assert len(pd.read_csv(out / "parity_jobs.csv")) == 12
    # a limit tighter than the measured difference must fail with exit status 1
    rc = main(["parity", str(t), "--out", str(tmp_path / "par2"), "--policies", "fifo",
               "--backends", "sim:analytic,sim:flow", "--limit", str(abs(want) / 2), "--quiet"])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out


def test_parity_bad_flags_exit_2(tmp_path, capsys):
    t = _trial(tmp_path)
    assert main(["parity", str(t), "--out", str(tmp_path / "x"), "--backends", "sim,sim"]) == 2
    assert main(["parity", str(t), "--out", str(tmp_path / "y"), "--backends", "sim,gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("raytestbed: error:") == 2


# ---------------------------------------------------------------- faults


def test_inject_kill_server_accounts_for_every_job(tmp_path):
    t = _trial(tmp_path, jobs=16)
    base, hit = tmp_path / "base", tmp_path / "hit"
    assert main(["run", str(t), "--out", str(base), "--quiet"]) == 0
    assert main(["run", str(t), "--out", str(hit), "--quiet", "--inject", "kill_server:1@60s"]) == 0
    summary = json.loads((hit / "summary.json").read_text())
    assert summary["faults"] == ["kill_server:1@60s"]
    events = [json.loads(line) for line in (hit / "events.jsonl").read_text().splitlines()]
    lost = [e for e in events if e["event"] == "ServerLost"]
    assert len(lost) == 1 and lost[0]["server"] == 1 and lost[0]["t"] == 60.0
    failed = [e["job"] for e in events if e["event"] == "JobFailed"]
    assert sorted(failed) == sorted(lost[0]["failed"])
    jobs = pd.read_csv(hit / "jobs.csv")
    assert len(jobs) == 16 and set(jobs["status"]) == {"finished"}  # 3 servers x 4 GPUs still fit every job
    assert jobs.loc[jobs["job_id"].isin(failed), "failures"].eq(1).all()
    # every job started after the fault holds no GPU of server 1 (placement text: "s0:<server>x<count>")
    late = jobs[jobs["first_start_s"] > 60.0]
    assert len(late) and not late["placement"].str.contains(r"[:+]1x", regex=True).any()
    base_total = json.loads((base / "summary.json").read_text())["total_jct_s"]
    assert summary["total_jct_s"] != base_total
    # a malformed fault is a one-line error
    assert main(["run", str(t), "--out", str(tmp_path / "bad"), "--inject", "kill_server:x@1s"]) == 2
    assert main(["run", str(t), "--out", str(tmp_path / "bad"), "--inject", "kill_server:9@1s"]) == 2


# ---------------------------------------------------------------- resume


def _interrupt_after(monkeypatch, n_finished: int) -> None:
    """Make the simulator raise KeyboardInterrupt when job number n_finished + 1 finishes (as Ctrl-C would)."""
    orig = engine.Simulator.finish
    count = [0]

    def finish(self, jid):
        count[0] += 1
        if count[0] > n_finished:
            raise KeyboardInterrupt
        return orig(self, jid)

    monkeypatch.setattr(engine.Simulator, "finish", finish)


@pytest.mark.parametrize("mode", ["analytic", "flow"])
def test_interrupted_run_resumes_to_the_uninterrupted_run(tmp_path, monkeypatch, capsys, mode):
    """Interrupted after 5 of 14 jobs, resumed: jobs.csv and gpu_intervals.csv are byte for byte the
    uninterrupted run's (the journaled jobs load the cluster again; with pipelines in flow timing they
    share links with the others)."""
    t = _trial(tmp_path, jobs=14, comm="pipeline" if mode == "flow" else "rar", mode=mode)
    out = tmp_path / "r"
    with monkeypatch.context() as m:
        _interrupt_after(m, 5)
        assert main(["run", str(t), "--out", str(out), "--quiet"]) == 130
    assert "--resume" in capsys.readouterr().err
    assert (out / "RESUMABLE.json").is_file() and not (out / "summary.json").exists()
    journaled = read_journal(out / "journal.jsonl")
    assert len(journaled.rows) == 5
    # not resumable by accident: an ordinary run into it is refused
    assert main(["run", str(t), "--out", str(out), "--quiet"]) == 2
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv")
    full = tmp_path / "full"
    assert main(["run", str(t), "--out", str(full), "--quiet"]) == 0
    ref = pd.read_csv(full / "jobs.csv")
    assert len(jobs) == len(ref) == 14 and jobs["job_id"].is_unique
    for name in ("jobs.csv", "gpu_intervals.csv", "events.jsonl"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    # journaled jobs keep their records verbatim
    for jid, row in journaled.rows.items():
        got = jobs.loc[jobs["job_id"] == jid].iloc[0]
        assert got["finish_s"] == row["finish_s"] and got["placement"] == row["placement"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed"] == {"journaled_jobs": 5, "remaining_jobs": 9, "differing_jobs": [],
                                  "comparable": True}
    assert summary["note"] == "resumed: 5 journaled jobs re-run identically"
    assert summary["total_jct_s"] == json.loads((full / "summary.json").read_text())["total_jct_s"]
    assert not (out / "RESUMABLE.json").exists()
    assert main(["run", "--resume", str(out)]) == 2  # complete: nothing to resume


def test_a_journal_the_rerun_contradicts_marks_the_run_not_comparable(tmp_path, monkeypatch, capsys):
    """A journaled record that the deterministic re-run does not reproduce (here: edited by hand) is
    kept verbatim, reported at once, and the run says "resumed, not comparable" in its summary,
    report and printed table."""
    t = _trial(tmp_path, jobs=8)
    out = tmp_path / "r"
    with monkeypatch.context() as m:
        _interrupt_after(m, 3)
        assert main(["run", str(t), "--out", str(out), "--quiet"]) == 130
    lines = (out / "journal.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    jid, true_finish = rec["row"]["job_id"], rec["row"]["finish_s"]
    rec["row"]["finish_s"] = true_finish + 1.5
    (out / "journal.jsonl").write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    cap = capsys.readouterr()
    assert f"job {jid}'s re-run differs from its journaled record (finish_s: journal {true_finish + 1.5!r}" in cap.err
    assert "resumed, not comparable" in cap.out
    jobs = pd.read_csv(out / "jobs.csv").set_index("job_id")
    assert jobs.loc[jid, "finish_s"] == true_finish + 1.5  # verbatim
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed"]["differing_jobs"] == [jid] and summary["resumed"]["comparable"] is False
    assert summary["note"].startswith("resumed, not comparable: 1 of 3 journaled jobs differ")
    assert "resumed, not comparable" in (out / "report.md").read_text()


def test_interrupted_compare_resumes(tmp_path, monkeypatch):
    t = _trial(tmp_path, jobs=10, mode="flow")
    out = tmp_path / "c"
    with monkeypatch.context() as m:
        _interrupt_after(m, 13)  # fifo (10 jobs) completes, fifo+fair is interrupted after 3 jobs
        assert main(["compare", str(t), "--policies", "fifo,fifo+fair", "--out", str(out), "--quiet"]) == 130
    assert (out / "fifo" / "summary.json").is_file()
    assert len(read_journal(out / "fifo+fair" / "journal.jsonl").rows) == 3
    fifo_jobs = (out / "fifo" / "jobs.csv").read_bytes()
    assert main(["compare", "--resume", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "comparison.csv")
    assert df["policy"].tolist() == ["fifo", "fifo+fair"] and (df["finished"] == 10).all()
    assert (out / "fifo" / "jobs.csv").read_bytes() == fifo_jobs
    assert df["note"].isna().tolist() == [True, False] and df["note"][1].startswith("resumed: 3 journaled")
    full = tmp_path / "full"
    assert main(["run", str(t), "--policy", "fifo+fair", "--out", str(full), "--quiet"]) == 0
    assert (out / "fifo+fair" / "jobs.csv").read_bytes() == (full / "jobs.csv").read_bytes()
    assert "resumed: 3 journaled jobs" in (out / "report.md").read_text()
    assert not list(tmp_path.glob("c.*"))


# ---------------------------------------------------------------- predictor history


def test_a_trace_workloads_history_reaches_the_policy_with_epoch_admission(tmp_path, monkeypatch):
    """The rows that train the predictors ride on the loaded job set; admitting the jobs in epochs
    copies them into a plain list, which must not drop the history (A-SRPT would start cold)."""
    (tmp_path / "histwl.py").write_text('''
from raytestbed.traces.asrpt_workload import TraceJobs
from raytestbed.traces.registry import WORKLOADS


def jobs(params, ctx):
    synth = WORKLOADS.get("synthetic").obj({"jobs": 6, "iterations": [20, 40], "models": ["resnet50"]}, ctx)
    return TraceJobs(synth[3:], history_jobs=synth[:3])
''')
    t = tmp_path / "t.yaml"
    t.write_text("cluster: laptop.yaml\nseed: 1\nworkload: {kind: 'histwl:jobs'}\n"
                 "timing: {mode: analytic, admission_epoch_s: 10}\n")
    import raytestbed.trial as trial_mod

    seen = []
    real = trial_mod.make_policy
    monkeypatch.setattr(trial_mod, "make_policy",
                        lambda name, role, seed, search, **kw: seen.append((name, kw)) or real(name, role, seed,
                                                                                              search, **kw))
    assert main(["run", str(t), "--policy", "asrpt", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    history = [kw.get("history") for name, kw in seen if name == "asrpt"]
    assert history and history[-1] is not None and len(history[-1]) == 3


def test_real_compute_resume_is_never_called_comparable():
    """Real compute charges measured CPU time: even a re-run that happened to match its journal is
    marked "resumed, not comparable" (it cannot be reproduced on demand)."""
    from raytestbed.results.journal import JournalState
    from raytestbed.trial import _FinishedJournal

    prev = JournalState(header={}, rows={0: {"job_id": 0, "finish_s": 3.0}, 1: {"job_id": 1, "finish_s": 4.0}})
    fj = _FinishedJournal(writer=None, previous=prev)
    fj.replayed = {0, 1}
    section, note = fj.resume_note(5, deterministic=False)
    assert section == {"journaled_jobs": 2, "remaining_jobs": 3, "differing_jobs": [], "comparable": False}
    assert note.startswith("resumed, not comparable: real compute does not re-run identically")
    fj.differing = {1: ["finish_s: journal 4.0, re-run 4.1"]}
    section, note = fj.resume_note(5, deterministic=False)
    assert section["differing_jobs"] == [1] and "1 of 2 journaled jobs differ" in note and "job 1: finish_s" in note
    fj.differing = {}
    assert fj.resume_note(5)[0]["comparable"] is True
