"""Iteration-count predictors (A-SRPT §IV-C-3): RF on (group, user), mean/median, perfect, online refits."""

import numpy as np
import pytest

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.errors import ConfigError
from raytestbed.predict.iterations import OnlinePredictor, make_predictor


def job(group, user="u0", iters=100, jid=0):
    return Job(jid, 0.0, iters, (Stage(1, StageProfile(0.1, 0.1)),), CommPattern.RAR, user=user, group=group)


def training_set(seed=0):
    rng = np.random.default_rng(seed)
    typical = {f"g{i}": 100 * (i + 1) for i in range(8)}
    groups, users, iters = [], [], []
    for _ in range(400):
        g = f"g{int(rng.integers(8))}"
        groups.append(g)
        users.append(f"u{int(g[1:]) % 3}")
        iters.append(int(typical[g] * rng.lognormal(0, 0.1)))
    return groups, users, iters, typical


def test_rf_predicts_zero_for_unseen_group():
    g, u, n, _ = training_set()
    rf = make_predictor("rf", seed=0).fit(g, u, n)
    assert rf.predict_one("never-seen", "u0") == 0
    assert rf.predict_one("never-seen", "unknown-user") == 0
    assert rf.predict_one("g3", "u0") > 0


def test_rf_learns_group_dependent_pattern():
    g, u, n, typical = training_set()
    rf = make_predictor("rf", seed=0).fit(g, u, n)
    groups = sorted(typical)
    pred = rf.predict(groups, [f"u{int(x[1:]) % 3}" for x in groups])
    assert pred.dtype == np.int64
    for gr, p in zip(groups, pred):
        assert p == pytest.approx(typical[gr], rel=0.15)
    assert list(np.argsort(pred)) == list(range(8))  # ordering of groups recovered


def test_rf_seen_group_unseen_user_still_predicts():
    g, u, n, typical = training_set()
    rf = make_predictor("rf", seed=0).fit(g, u, n)
    assert rf.predict_one("g5", "new-user") > 0


def test_rf_is_deterministic_under_seed():
    g, u, n, _ = training_set()
    a = make_predictor("rf", seed=3).fit(g, u, n).predict(g[:50], u[:50])
    b = make_predictor("rf", seed=3).fit(g, u, n).predict(g[:50], u[:50])
    assert (a == b).all()


def test_mean_and_median_per_group():
    groups = ["a", "a", "a", "b"]
    iters = [10, 20, 90, 7]
    mean = make_predictor("mean").fit(groups, ["x"] * 4, iters)
    med = make_predictor("median").fit(groups, ["x"] * 4, iters)
    assert list(mean.predict(["a", "b", "c"], ["x"] * 3)) == [40, 7, 0]
    assert list(med.predict(["a", "b", "c"], ["x"] * 3)) == [20, 7, 0]


def test_perfect_and_given():
    j = job("g", iters=1234)
    assert make_predictor("perfect").predict_job(j) == 1234
    j.predicted_iterations = 77
    assert make_predictor("given").predict_job(j) == 77
    with pytest.raises(ConfigError):
        make_predictor("given").predict_job(job("g"))
    with pytest.raises(ConfigError):
        make_predictor("nope")


def test_online_predictor_retrains_every_n_completions():
    p = OnlinePredictor("mean", retrain_every=3)
    assert p.predict(job("a")) == 0
    assert not p.observe(job("a"), 10)
    assert not p.observe(job("a"), 20)
    assert p.predict(job("a")) == 0  # not refitted yet
    assert p.observe(job("a"), 30)
    assert p.predict(job("a")) == 20 and p.fits == 1
    rf = OnlinePredictor("rf", retrain_every=2, history=[("a", "u", 100), ("b", "u", 300)])
    assert rf.fits == 1 and rf.predict(job("b", "u")) > rf.predict(job("a", "u")) > 0
    with pytest.raises(ConfigError):
        OnlinePredictor("mean", retrain_every=0)
