"""``jobs.csv``'s ``predicted_iterations``: each policy's ñ_i at arrival (``Policy.predictions``),
copied into the job records by both backends, else the workload's ``Job.predicted_iterations``."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import rar_job, small_cluster
from raytestbed.cli import main
from raytestbed.core.decisions import DecisionBook, JobRecord
from raytestbed.core.state import ClusterState
from raytestbed.predict.iterations import OnlinePredictor
from raytestbed.results.records import job_rows
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator

PREDICTING = ["asrpt", "asrpt-perfect", "spjf", "spwf", "wcs-duration", "wcs-workload"]


def _trial(tmp_path: Path, policy: str, params: dict | None = None, jobs: int = 12) -> Path:
    """A tiny synthetic trial: few recurring groups, so some groups repeat."""
    doc = {
        "name": "pred", "seed": 2, "cluster": "laptop.yaml",
        "workload": {"kind": "synthetic", "jobs": jobs, "groups": 3, "users": 2, "mean_interarrival_s": 50,
                     "iterations": [20, 60], "gpu_mix": {1: 0.6, 2: 0.4}},
        "policy": policy, "timing": {"mode": "analytic", "model": "asrpt"},
    }
    if params:
        doc["policy_params"] = {policy: params}
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _jobs_csv(tmp_path: Path, policy: str, params: dict | None = None) -> pd.DataFrame:
    out = tmp_path / "r"
    assert main(["run", str(_trial(tmp_path, policy, params)), "--backend", "sim", "--out", str(out),
                 "--quiet"]) == 0
    df = pd.read_csv(out / "jobs.csv")
    assert (df["status"] == "finished").all()
    return df


def test_asrpt_perfect_predictions_equal_true_iterations(tmp_path):
    df = _jobs_csv(tmp_path, "asrpt", {"predictor": "perfect"})
    assert df["predicted_iterations"].notna().all()
    assert (df["predicted_iterations"] == df["iterations"]).all()


def test_asrpt_rf_without_history_predicts_zero_for_unseen_groups(tmp_path):
    # no history and no refit during the trial: every group is unseen at every arrival
    df = _jobs_csv(tmp_path, "asrpt", {"predictor": "rf", "retrain_every": 1000})
    assert df["predicted_iterations"].notna().all()
    assert (df["predicted_iterations"] == 0).all()


@pytest.mark.parametrize("name", ["asrpt", "spjf"])
def test_recorded_value_is_what_the_predictor_returned_at_arrival(tmp_path, monkeypatch, name):
    """Refits after every completion: later arrivals of a seen group get non-zero, changing predictions;
    the column holds the value returned at each job's arrival, not a later one."""
    returned: dict[int, int] = {}
    real = OnlinePredictor.predict

    def spy(self, job, now_s=0.0):
        n = real(self, job, now_s)
        assert job.job_id not in returned  # one prediction per job, at its arrival
        returned[job.job_id] = n
        return n

    monkeypatch.setattr(OnlinePredictor, "predict", spy)
    df = _jobs_csv(tmp_path, name, {"predictor": "mean", "retrain_every": 1})
    assert sorted(returned) == sorted(df["job_id"])
    got = dict(zip(df["job_id"], df["predicted_iterations"].astype(int)))
    assert got == returned
    assert any(v > 0 for v in returned.values())  # the check is not only about zeros


@pytest.mark.parametrize("name", ["fifo", "wcs-subtime"])
def test_policy_without_predictions_leaves_the_column_empty(tmp_path, name):
    df = _jobs_csv(tmp_path, name)
    assert df["predicted_iterations"].isna().all()


@pytest.mark.parametrize("name", PREDICTING)
def test_every_predicting_policy_fills_its_mapping_without_touching_jobs(name):
    c = small_cluster(servers=2, gpus=4)
    jobs = [rar_job(j, 3.0 * j, workers=1 + j % 2, iterations=5 + j) for j in range(6)]
    pol = make_policy(name, predictor="perfect") if name != "asrpt-perfect" else make_policy(name)
    res = Simulator(c, jobs, pol).run()
    assert dict(pol.predictions) == {j.job_id: j.iterations for j in jobs}
    assert [r.predicted_iterations for r in res.records] == [j.iterations for j in jobs]
    assert all(j.predicted_iterations is None for j in jobs)  # the shared Job objects are unchanged


def test_workload_prediction_is_the_fallback_and_a_policy_prediction_wins():
    job = rar_job(0, 0.0, workers=1, iterations=10)
    job.predicted_iterations = 7
    rec = JobRecord(job)
    assert job_rows([rec])[0]["predicted_iterations"] == 7
    rec.predicted_iterations = 0
    assert job_rows([rec])[0]["predicted_iterations"] == 0
    assert job_rows([JobRecord(rar_job(1))])[0]["predicted_iterations"] == ""


class _Predicts(Policy):
    name = "_predicts"
    role = "network"

    def __init__(self, values):
        super().__init__()
        self.predictions = dict(values)

    def on_event(self, event, view):
        return []


def test_note_predictions_first_policy_of_a_pair_wins_and_a_network_policy_passes_through():
    jobs = [rar_job(j) for j in range(3)]
    records = {j.job_id: JobRecord(j) for j in jobs}
    book = DecisionBook(ClusterState(small_cluster()), records, lambda *a: None)
    pols = [_Predicts({0: 5}), _Predicts({0: 9, 1: 4})]
    for j in jobs:
        book.note_predictions(j.job_id, pols)
    assert [records[j].predicted_iterations for j in range(3)] == [5, 4, None]
    assert make_policy("fifo").predictions == {}
    with pytest.raises(TypeError):
        make_policy("fifo").predictions[0] = 1  # the default is read-only


def test_pair_in_the_simulator_records_the_placement_policy_predictions():
    c = small_cluster(servers=2, gpus=4)
    jobs = [rar_job(j, 2.0 * j, workers=2, iterations=4 + j) for j in range(4)]
    res = Simulator(c, jobs, make_policy("asrpt-perfect"), make_policy("fair", "network"), mode="flow").run()
    assert [r.predicted_iterations for r in res.records] == [j.iterations for j in jobs]

