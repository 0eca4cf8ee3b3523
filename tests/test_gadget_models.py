"""GADGET's workload with zoo models (``models:``), so real compute can run it, and the refusal of real
compute for jobs it cannot run."""

from pathlib import Path

import pytest

from raytestbed.cli import main
from raytestbed.config import load_trial
from raytestbed.core.profile import default_profiles
from raytestbed.emu.backend import EmuBackend, check_real_compute
from raytestbed.errors import TraceError
from raytestbed.traces.registry import load_workload

TRIALS = Path(__file__).resolve().parents[1] / "workloads" / "trials"


def _jobs(name, **changes):
    lt = load_trial(TRIALS / f"{name}.yaml")
    cluster = lt.cluster_config.build()
    wl = {**lt.trial.workload.model_dump(), **changes}
    kind = wl.pop("kind")
    return lt, cluster, load_workload(kind, wl, cluster, lt.trial.seed, lt.base_dir)


def test_a_models_job_runs_its_models_step_and_zeta_follows_from_it():
    lt, _, jobs = _jobs("gadget12_real")
    _, _, synthetic = _jobs("gadget12_real", models=None)
    profiles = default_profiles()
    slot_s = lt.trial.workload.model_dump()["slot_s"]
    assert [j.model for j in jobs] == ["resnet-small", "vgg19-cifar"] * 6
    for j, s in zip(jobs, synthetic):
        whole = profiles[j.model].stage_profiles([0])[0]
        prof = j.stages[0].profile
        assert (prof.fwd_s, prof.bwd_s, prof.param_bytes) == (whole.fwd_s, whole.bwd_s, whole.param_bytes)
        assert prof.param_bytes > 0  # the model's gradient moves (real compute moves the real tensors)
        assert j.extra["zeta"] == pytest.approx(slot_s / (whole.fwd_s + whole.bwd_s), rel=1e-12)
        # every other draw is GADGET's, as without models: only the model, the step and zeta differ
        assert (j.arrival_s, j.iterations, j.max_workers, j.stages[0].replicas) == \
               (s.arrival_s, s.iterations, s.max_workers, s.stages[0].replicas)
        for key in ("F", "b_bps", "mem_gb", "lambda1", "lambda2", "lambda3", "N", "fixed_workers"):
            assert j.extra[key] == s.extra[key], (j.job_id, key)
        assert s.model == "gadget-synthetic" and s.stages[0].profile.param_bytes == 0
    # resnet-small 174, vgg19-cifar 75 iterations per worker per 10 s slot: inside GADGET's [50, 500]
    assert all(50 <= j.extra["zeta"] <= 500 for j in jobs)


def test_an_unknown_model_is_refused_by_name():
    with pytest.raises(TraceError, match="unknown model 'no-such-net'"):
        _jobs("gadget12_real", models=["resnet-small", "no-such-net"])


def test_real_compute_refuses_a_synthetic_gadget_job_before_anything_runs(tmp_path, capsys):
    lt, _, jobs = _jobs("gadget12")
    trial = EmuBackend().with_mode(lt.trial, "real")
    why = EmuBackend().refusal(trial, [], jobs, None)
    assert "job 0" in why and "'gadget-synthetic'" in why and "\n" not in why
    lt_real, _, jobs_real = _jobs("gadget12_real")
    assert EmuBackend().refusal(EmuBackend().with_mode(lt_real.trial, "real"), [], jobs_real, None) is None
    out = tmp_path / "out"
    rc = main(["parity", str(TRIALS / "gadget12.yaml"), "--policies", "gadget", "--backends", "sim,emu:real",
               "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "job 0" in err and "gadget-synthetic" in err and len(err.splitlines()) == 1, err
    assert not out.exists()  # refused before the simulator ran


def test_real_compute_accepts_parameter_server_jobs():
    """The pre-run check places a PS job's parameter servers too (it refused every PS job before)."""
    lt, cluster, jobs = _jobs("parity_parrot20")
    assert any(j.num_ps for j in jobs)
    check_real_compute(cluster, jobs, lt.profiles)


def test_the_emulator_replays_the_models_trial_as_the_flow_simulator_does():
    """gadget12_real in replay on the in-process emulator against the flow simulator: same finish per job
    (the model's gradient moves on the fluid model on both); what real compute adds is measured by
    ``raytestbed parity ... --backends sim,emu:real`` (docs/benchmarks.md)."""
    from conftest import run_emulated_in_process
    from raytestbed.core.timing import GadgetModel
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator

    lt, cluster, jobs = _jobs("gadget12_real")
    pol = lambda: make_policy("gadget", "placement", lt.trial.seed, **lt.trial.policy_params["gadget"])  # noqa: E731
    sim = Simulator(cluster, jobs, pol(), mode="flow", model=GadgetModel()).run()
    res, _, _ = run_emulated_in_process(cluster, _jobs("gadget12_real")[2], [pol()], timeout_s=600)
    assert all(sim.iterations_done[j.job_id] == j.iterations for j in jobs)  # every job finished its budget
    for r in sim.records:
        assert res["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-6, abs=1e-9), r.job.job_id
