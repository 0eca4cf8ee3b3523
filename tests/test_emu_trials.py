"""Must-show end-to-end trials on the Ray emulated cluster (real EmuCluster, fabric and executors):

* a small trial runs end to end with FIFO and with A-SRPT (``compare --backend emu``);
* killing a server mid-trial finishes the trial with the affected jobs failed, handled by the
  policy (restarted elsewhere) and every job accounted for;
* (slow) an interrupted emulated trial resumes to the same set of finished jobs.

One module-scoped Ray instance (random ports, loopback) serves every test; the emulator reuses it.
Ray and worker-pool start-up dominate the wall time on a 2-core host, so the default-suite test runs
both policies once, with the fault injected.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from raytestbed.cli import main  # noqa: E402
from raytestbed.emu.backend import emulator_missing  # noqa: E402

pytestmark = pytest.mark.skipif(emulator_missing() is not None, reason=f"emulator: {emulator_missing()}")

# 4 servers x 2 GPUs (one spare, so a failed job restarts at once); NIC 0.5 Gbit/s; tiny real models
JOBS = """job_id,arrival_s,gpus,iterations,model,comm,user,group
0,0,2,30,resnet-small,rar,u0,g0
1,0,2,30,resnet-small,rar,u1,g1
2,0.5,2,10,gpt-tiny,pipeline,u2,g2
"""
N_JOBS = 3


def _trial(tmp_path: Path) -> Path:
    (tmp_path / "jobs.csv").write_text(JOBS)
    p = tmp_path / "emu_small.yaml"
    p.write_text("""
name: emu_small
seed: 1
cluster:
  name: tiny
  nic_gbps: 0.5
  intra_gbytes_per_s: 0.25
  servers: [{count: 4, gpus: 2}]
workload: {kind: csv, path: jobs.csv}
policy: fifo
timing: {mode: flow}
emu: {compute: replay, progress_s: 0.5}
""")
    return p


@pytest.fixture(scope="module")
def ray_local():
    if ray.is_initialized():
        yield
        return
    from raytestbed.emu.raysession import RaySession

    # the emulator's own start: waits as long as a busy host needs, retries once
    session = RaySession.open(num_cpus=2, resources={"emu_gpu": 8}, configure_logging=False)
    yield
    session.close()


def _events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def _check_run(folder: Path, policy: str, fault_time: float | None) -> None:
    s = json.loads((folder / "summary.json").read_text())
    assert s["policy"] == policy and s["backend"] == "emu" and s["total_jct_s"] > 0 and s["makespan_s"] > 0
    emu = s["emulation"]
    assert emu["clock"] == "virtual" and emu["compute"] == "replay" and emu["emulated_gpus"] == 8
    assert 0 < emu["peak_busy_gpus"] <= 8 and emu["late_steps"] == 0
    assert emu["repeatability"].startswith("exact")  # replay: the summary says a rerun gives the same times
    jobs = pd.read_csv(folder / "jobs.csv")
    assert sorted(jobs["job_id"]) == list(range(N_JOBS))  # every job accounted for, once
    assert (jobs["status"] == "finished").all()  # servers 0, 2 and 3 still fit every job
    # measured, not modelled: the executors ran every iteration of every finished job, or it was
    # fast-forwarded at its measured rate
    assert (jobs["measured_iterations"] + jobs["skipped_iterations"] >= jobs["iterations"]).all()
    assert (jobs["measured_iter_mean_s"] > 0).all() and (jobs["jct_s"] > 0).all()
    it = pd.read_csv(folder / "iterations.csv")
    ev = _events(folder)
    assert sum(e["event"] == "IterationMeasured" for e in ev) == len(it)
    assert len(it) + jobs["skipped_iterations"].sum() >= jobs["iterations"].sum()
    assert it["charge_ratio"].to_numpy() == pytest.approx(1.0, rel=1e-9)  # replay charges the profile
    assert sum(e["event"] == "JobFinished" for e in ev) == N_JOBS
    assert (folder / "report.md").is_file()
    if fault_time is None:
        return
    lost = [e for e in ev if e["event"] == "ServerLost"]
    # applied exactly at its emulated time (the virtual clock)
    assert len(lost) == 1 and lost[0]["server"] == 1 and lost[0]["t"] == fault_time
    # jobs 0 and 1 start at t = 0 (2 GPUs each, one server each) and need >= 30 x 58 ms of compute:
    # one of them holds server 1 when it dies
    failed = sorted(e["job"] for e in ev if e["event"] == "JobFailed")
    assert failed == sorted(lost[0]["failed"]) and len(failed) == 1
    assert (jobs.set_index("job_id").loc[failed, "failures"] == 1).all()
    # the policy restarted the failed job, not on server 1 (GPUs 2, 3)
    restarts = [e for e in ev if e["event"] == "JobStarted" and e["job"] in failed and e["t"] >= fault_time]
    assert {e["job"] for e in restarts} == set(failed)
    assert all(g not in (2, 3) for e in restarts for g in e["gpus"])
    assert s["faults"] == [f"kill_server:1@{fault_time}s"]


def test_fifo_and_asrpt_end_to_end_with_a_server_killed(tmp_path, ray_local):
    t = _trial(tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", str(t), "--policies", "fifo,asrpt", "--backend", "emu", "--out", str(out),
                 "--quiet", "--inject", "kill_server:1@1.0s"]) == 0
    df = pd.read_csv(out / "comparison.csv")
    assert df["policy"].tolist() == ["fifo", "asrpt"]
    assert (df["finished"] == N_JOBS).all() and (df["backend"] == "emu").all()
    for pol in ("fifo", "asrpt"):
        _check_run(out / pol, pol, 1.0)
    assert (out / "report.md").is_file()
    # A-SRPT's ñ_i at arrival reached jobs.csv through the scheduler actor (rf, no history: unseen
    # groups -> 0); FIFO predicts nothing
    assert (pd.read_csv(out / "asrpt" / "jobs.csv")["predicted_iterations"] == 0).all()
    assert pd.read_csv(out / "fifo" / "jobs.csv")["predicted_iterations"].isna().all()


def test_workers_in_the_pool_or_in_the_clock_actor_give_the_same_trial(tmp_path, ray_local):
    """``emu.workers``: the runs' participants in the worker pool's host processes (steps through Ray)
    or in the clock actor's process (method calls) -- the same jobs, byte for byte, with a server killed
    mid-trial; replay defaults to the clock actor."""
    t = _trial(tmp_path)
    text = t.read_text()
    outs = {}
    for layout in ("pool", "clock", "auto"):
        t.write_text(text.replace("emu: {compute: replay, progress_s: 0.5}",
                                  f"emu: {{compute: replay, progress_s: 0.5, workers: {layout}}}"))
        outs[layout] = out = tmp_path / layout
        assert main(["run", str(t), "--backend", "emu", "--out", str(out), "--quiet",
                     "--inject", "kill_server:1@1.0s"]) == 0
        _check_run(out, "fifo", 1.0)
        info = json.loads((out / "summary.json").read_text())["emulation"]
        assert info["workers"] == ("clock" if layout == "auto" else layout)
    jobs = {k: (o / "jobs.csv").read_bytes() for k, o in outs.items()}
    assert jobs["pool"] == jobs["clock"] == jobs["auto"]


def test_real_compute_refuses_workers_in_the_clock_actor(tmp_path, capsys):
    t = _trial(tmp_path)
    t.write_text(t.read_text().replace("emu: {compute: replay, progress_s: 0.5}", "emu: {workers: clock}"))
    assert main(["run", str(t), "--backend", "emu:real", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "emu.workers: clock runs replay compute only" in err and not (tmp_path / "o").exists()
    t.write_text(t.read_text().replace("emu: {workers: clock}", "emu: {workers: clock, compute: real}"))
    assert main(["run", str(t), "--backend", "emu", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "workers: clock runs replay compute only" in err and "emu" in err


@pytest.mark.slow
def test_policy_fault_in_the_clock_actor_is_one_line_on_the_terminal(tmp_path, ray_local, capsys):
    """The exception is raised inside the clock actor; the driver prints the same one line as the simulator."""
    t = _trial(tmp_path)
    (tmp_path / "faulty_emu.py").write_text(
        "from raytestbed import JobArrived, Policy\n\n\n"
        "class Raises(Policy):\n"
        "    role = 'placement'\n\n"
        "    def on_event(self, event, view):\n"
        "        return 1 / 0 if isinstance(event, JobArrived) and event.job.job_id == 2 else []\n")
    out = tmp_path / "out"
    code = main(["run", str(t), "--policy", "faulty_emu:Raises", "--backend", "emu", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists(), err
    line = [x for x in err.splitlines() if x.startswith("raytestbed: error: ")]
    assert line == ["raytestbed: error: policy 'faulty_emu:Raises' failed on JobArrived at t = 0.5 s (job 2): "
                    "raised ZeroDivisionError: division by zero"], err
    assert "Traceback" not in err


@pytest.mark.slow
def test_fifo_without_faults_matches_sim_keys(tmp_path, ray_local):
    t = _trial(tmp_path)
    assert main(["run", str(t), "--backend", "emu", "--out", str(tmp_path / "e"), "--quiet"]) == 0
    assert main(["run", str(t), "--backend", "sim", "--out", str(tmp_path / "s"), "--quiet"]) == 0
    _check_run(tmp_path / "e", "fifo", None)
    from raytestbed.results.records import SUMMARY_KEYS

    sim = json.loads((tmp_path / "s" / "summary.json").read_text())
    emu = json.loads((tmp_path / "e" / "summary.json").read_text())
    # objectives that only some trials carry: GADGET utilities (none here), the flow-mode
    # coflow lower bounds, which only the simulator computes, a resumed run's note, and the flow
    # simulator's fast-forward counts (the emulator reports its own under "emulation")
    conditional = {"total_utility", "total_lower_bound_s", "ratio_to_lb", "note", "fast_forward"}
    assert set(SUMMARY_KEYS) - conditional <= set(emu) and "emulation" in emu
    assert set(emu) >= set(sim) - conditional


@pytest.mark.slow
def test_interrupted_emulated_trial_resumes(tmp_path, ray_local, monkeypatch):
    """Ctrl-C after the first job finished: the folder is resumable; --resume runs the rest."""
    import raytestbed.trial as trial_mod

    t = _trial(tmp_path)
    out = tmp_path / "r"
    orig = trial_mod._FinishedJournal.__call__
    seen = {"finished": False}

    def journal_then_interrupt(self, jid):
        orig(self, jid)  # the finished job is journaled, then the user presses Ctrl-C
        seen["finished"] = True
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(trial_mod._FinishedJournal, "__call__", journal_then_interrupt)
        assert main(["run", str(t), "--backend", "emu", "--out", str(out), "--quiet"]) == 130
    assert seen["finished"] and (out / "RESUMABLE.json").is_file()
    journaled = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()[1:]]
    assert journaled
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv")
    assert sorted(jobs["job_id"]) == list(range(N_JOBS)) and (jobs["status"] == "finished").all()
    for rec in journaled:
        row = jobs.set_index("job_id").loc[rec["row"]["job_id"]]
        assert row["finish_s"] == rec["row"]["finish_s"]
