"""The simulator's compute noise (timing.compute_noise): every replayed pass of a worker-by-worker job
times a lognormal factor of mean 1, drawn from the run's seed and timing.compute_noise_seed."""

import numpy as np
import pandas as pd
import pytest

from raytestbed.errors import ConfigError
from raytestbed.execution.compute import lognormal_noise
from raytestbed.experiments.spec import trial_with
from raytestbed.trial import BackendSpec, PolicyPair, run_into

TRIAL = "workloads/trials/parity_ps.yaml"  # 8 PS jobs in flow timing: every job runs worker by worker


def test_noise_has_mean_one_and_the_asked_spread():
    draw = lognormal_noise(0.05, (1, 2))
    x = np.array([draw() for _ in range(20000)])
    assert abs(x.mean() - 1.0) < 2e-3 and abs(x.std() / x.mean() - 0.05) < 2e-3
    again = lognormal_noise(0.05, (1, 2))
    assert [again() for _ in range(5)] == list(x[:5])  # the same seed, the same draws


def _jcts(tmp_path, name, noise=0.0, noise_seed=0, **extra):
    over = {"timing.compute_noise": noise, "timing.compute_noise_seed": noise_seed, **extra}
    loaded = trial_with(TRIAL, over)
    out = tmp_path / name
    run_into(out, loaded, PolicyPair.parse("fifo"), loaded.trial.seed, BackendSpec.parse("sim"), show_progress=False,
             report=False)
    return pd.read_csv(out / "jobs.csv").set_index("job_id")["jct_s"]


def test_noise_moves_jobs_and_repeats_with_its_seed(tmp_path):
    plain = _jcts(tmp_path, "plain")
    assert plain.equals(_jcts(tmp_path, "zero", noise=0.0, noise_seed=3))  # no noise: the seed is unused
    a, b, c = (_jcts(tmp_path, n, 0.05, s) for n, s in (("a", 1), ("b", 1), ("c", 2)))
    assert a.equals(b)  # same seeds, same run
    assert not a.equals(c) and not a.equals(plain)  # another draw; noise changes times
    # a mean-one noise of 5 % moves each job by a few per cent, not by its scale
    assert ((a / plain - 1).abs() < 0.25).all()


@pytest.mark.parametrize("over, words", [
    ({"timing.mode": "analytic"}, "needs timing.mode: flow"),
    ({"timing.schedule": "coflows"}, "needs timing.mode: flow"),
    ({"workload.comm_mix": {"rar": 1.0}}, "does not run worker by worker"),
])
def test_noise_refused_where_a_job_would_run_without_it(tmp_path, over, words):
    with pytest.raises(ConfigError, match=words):
        _jcts(tmp_path, "refused", 0.02, 1, **over)


def test_the_emulator_refuses_the_simulators_noise():
    from raytestbed.emu.backend import EmuBackend

    trial = trial_with(TRIAL, {"timing.compute_noise": 0.02}).trial
    assert "only the sim backend draws compute noise" in EmuBackend().refusal(trial, [], None, None)

