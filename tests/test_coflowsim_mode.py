"""The CoflowSim-compatible knobs: admission epochs and Aalo's queues, on coflows worked out by hand."""

from __future__ import annotations

import pytest

from raytestbed.config import TrialConfig
from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.job import CommPattern, Job, JobTraffic, Stage, StageProfile, admit_in_epochs
from raytestbed.errors import PolicyError
from raytestbed.schedulers.base import make_policy
from raytestbed.schedulers.fifo import FifoPolicy
from raytestbed.sim.engine import Simulator

C = 1e6  # port capacity, bytes/s


def job(jid: int, arrival: float, flows) -> Job:
    return Job(jid, arrival, 1, (Stage(1, StageProfile(0.0, 0.0)),), CommPattern.RAR,
               traffic=JobTraffic(coflows=(tuple((s, d, b * C) for s, d, b in flows),), compute_s=0.0))


def run(netpol, jobs) -> dict[int, float]:
    cl = Cluster(tuple(Server(i, 2, C, C) for i in range(3)), intra_bps=1e12, name="t")
    res = Simulator(cl, jobs, FifoPolicy(), netpol, mode="flow").run()
    return {r.job.job_id: r.finish_s - r.job.arrival_s for r in res.records}


# A: 0->1, 2 units at t=0; B: 0->1, 1 unit at t=5; C: 2->0, 1 unit at t=10.34
THREE = [job(0, 0.0, [(0, 1, 2)]), job(1, 5.0, [(0, 1, 1)]), job(2, 10.34, [(2, 0, 1)])]


def test_epoch_admission_times():
    got = admit_in_epochs(THREE, 10.24)
    assert [j.arrival_s for j in got] == [0.0, 0.0, 10.24]
    assert [j.extra["trace_arrival_s"] for j in got] == [0.0, 5.0, 10.34]
    assert [j.arrival_s for j in admit_in_epochs(THREE, 0.0)] == [0.0, 5.0, 10.34]
    # an arrival exactly on an epoch boundary belongs to the epoch before it (CoflowSim: a <= t + E)
    assert admit_in_epochs([job(3, 20.48, [(0, 1, 1)])], 10.24)[0].arrival_s == pytest.approx(10.24)
    with pytest.raises(ValueError):
        admit_in_epochs(THREE, -1.0)


def test_epoch_admission_ccts_by_hand():
    """Exact arrivals: every coflow is alone -> CCTs 2, 1, 1. With 10.24 s epochs A and B start together
    at 0 and share egress 0 (C/2 each): B ends at 2 (CCT 2), A has 1 unit left at full rate -> 3 (CCT 3);
    C starts at 10.24 alone (CCT 1, counted from admission)."""
    assert run(make_policy("fair", "network"), THREE) == pytest.approx({0: 2.0, 1: 1.0, 2: 1.0})
    assert run(make_policy("fair", "network"), admit_in_epochs(THREE, 10.24)) == pytest.approx({0: 3.0, 1: 2.0, 2: 1.0})


def test_trial_option():
    t = TrialConfig.model_validate({"cluster": "laptop.yaml", "workload": {"kind": "synthetic"},
                                    "timing": {"mode": "flow", "admission_epoch_s": 10.24}})
    assert t.timing.admission_epoch_s == 10.24
    assert TrialConfig.model_validate({"cluster": "x", "workload": {"kind": "s"}}).timing.admission_epoch_s == 0.0


def aalo(**kw):
    return make_policy("aalo", "network", first_threshold_bytes=2 * C, multiplier=10.0, **kw)


def test_aalo_queues_fifo_inside_a_queue():
    """A: 0->1, 3 units at 0; B: 0->1, 1 unit at 0.5. Strict least-bytes-sent: at 0.5 A has sent 0.5,
    B 0 -> B first (0.5..1.5, CCT 1), A ends at 4. Queues (T1 = 2 units): both in queue 0 at 0.5 ->
    FIFO, A keeps the port until it ends at 3 (no event in between demotes it), B runs 3..4 (CCT 3.5)."""
    jobs = [job(0, 0.0, [(0, 1, 3)]), job(1, 0.5, [(0, 1, 1)])]
    assert run(aalo(), jobs) == pytest.approx({0: 4.0, 1: 1.0})
    assert run(aalo(queues=10), jobs) == pytest.approx({0: 3.0, 1: 3.5})


def test_aalo_queues_demote_past_the_threshold():
    """B arrives at 2.5 when A has sent 2.5 > T1 = 2 units: A is in queue 1, B in queue 0 -> B first
    (2.5..3.5, CCT 1), A's last half unit ends at 4."""
    jobs = [job(0, 0.0, [(0, 1, 3)]), job(1, 2.5, [(0, 1, 1)])]
    assert run(aalo(queues=10), jobs) == pytest.approx({0: 4.0, 1: 1.0})
    assert run(aalo(queues=1), jobs) == pytest.approx({0: 3.0, 1: 1.5})  # one queue = FIFO


def test_aalo_queue_parameters_checked():
    a = make_policy("aalo", "network", queues=10)
    assert [a.queue_of(x) for x in (0, 10 * 2**20, 10 * 2**20 + 1, 100 * 2**20 + 1, 1e30)] == [0, 0, 1, 2, 9]
    for bad in ({"queues": 0}, {"multiplier": 1.0}, {"first_threshold_bytes": 0.0}):
        with pytest.raises(PolicyError):
            make_policy("aalo", "network", **bad)


def test_fb_trial_runs_with_epochs_and_reports_varys_bins(tmp_path):
    """The fb_coflow trial (first 40 coflows) through the CLI with CoflowSim's epochs and varys: jobs.csv
    has each coflow's width, largest flow and Varys bin; arrivals are epoch starts; report.md has the bins."""
    import pandas as pd
    import yaml

    from raytestbed.cli import main
    from raytestbed.traces.datadir import find_data_dir as data_dir
    from raytestbed.traces.parrot_workloads import FB_FILE

    if data_dir() is None or not data_dir().joinpath(*FB_FILE).is_file():
        pytest.skip("shared data absent")
    repo = __import__("pathlib").Path(__file__).resolve().parents[1]
    t = yaml.safe_load((repo / "workloads" / "trials" / "fb_coflow_10g.yaml").read_text())
    t["workload"]["limit"] = 40
    t["timing"]["admission_epoch_s"] = 10.24
    t["policy"] = "fifo+varys"
    path = tmp_path / "fb.yaml"
    path.write_text(yaml.safe_dump(t))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    jobs = pd.read_csv(tmp_path / "r" / "jobs.csv")
    assert len(jobs) == 40 and (jobs["status"] == "finished").all()
    assert set(jobs["varys_bin"]) <= {"SN", "LN", "SW", "LW"} and len(set(jobs["varys_bin"])) >= 2
    assert ((jobs["arrival_s"] / 10.24).round(9) % 1 == 0).all()
    wide = jobs["coflow_width"] > 50
    assert (jobs.loc[wide, "varys_bin"].str[1] == "W").all() and (jobs.loc[~wide, "varys_bin"].str[1] == "N").all()
    assert (jobs["jct_s"] >= jobs["lower_bound_s"] * (1 - 1e-9)).all()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## Coflows by Varys bin" in report and "mean_slowdown" in report


def test_aalo_port_share_rates_by_hand():
    """DARK's split: one coflow 0->1 (2 units), 0->2 (1 unit), 2->1 (1 unit). Port shares among its own
    flows: egress 0 has 2 flows (C/2 each), ingress 1 has 2 (C/2 each), others 1: every flow gets C/2.
    2->1 and 0->2 end at 2; 0->1 has 1 unit left, alone at C (new decision only when a coflow starts
    or ends: none here, so it keeps C/2) -> ends at 4. O3 instead: Gamma = 3 (egress 0 and ingress 1
    carry 3 units) -> every flow ends at 3."""
    jobs = [job(0, 0.0, [(0, 1, 2), (0, 2, 1), (2, 1, 1)])]
    assert run(make_policy("aalo", "network", coflow_rates="port_share"), jobs) == pytest.approx({0: 4.0})
    assert run(make_policy("aalo", "network"), jobs) == pytest.approx({0: 3.0})
    with pytest.raises(PolicyError):
        make_policy("aalo", "network", coflow_rates="fair")
