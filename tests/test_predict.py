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



def test_online_predictor_refits_daily_on_the_jobs_completed_before_the_day_ended():
    day = 86_400.0
    p = OnlinePredictor("mean")  # default: the time schedule, one day
    assert p.retrain_every is None and p.retrain_every_s == day
    assert not p.observe(job("a"), 10, now_s=100.0)
    assert not p.observe(job("a"), 20, now_s=day - 1)
    assert p.predict(job("a"), now_s=day - 0.5) == 0 and p.fits == 0  # day 1 not over
    # the first completion of day 2 refits on the two jobs of day 1, then joins the data
    assert p.observe(job("a"), 90, now_s=day + 5)
    assert p.fits == 1 and p.predict(job("a"), now_s=day + 6) == 15
    # nothing happens until day 3; an arrival then refits (the day-2 completion joins)
    assert p.predict(job("a"), now_s=2 * day + 1) == 40 and p.fits == 2
    # a day without completions: no refit; a jump over several days moves to the next boundary
    assert p.predict(job("a"), now_s=5 * day) == 40 and p.fits == 2
    assert p._next_fit_s == 6 * day
    with pytest.raises(ConfigError):
        OnlinePredictor("mean", retrain_every_s=0)


def test_rf_engines_predict_the_same():
    """The exact forest fit (raytestbed/predict/forest.py) and scikit-learn's give identical predictions."""
    from raytestbed.predict.iterations import RandomForestPredictor

    groups, users, iters, _ = training_set()
    query = (list(groups[:50]) + ["g1", "g2", "zz"], list(users[:50]) + ["nobody", "u0", "u0"])
    out = {}
    for engine in ("exact", "sklearn"):
        m = RandomForestPredictor(seed=3)
        m.engine = engine
        out[engine] = m.fit(groups, users, iters).predict(*query)
    assert out["exact"].tolist() == out["sklearn"].tolist()
    assert out["exact"][-1] == 0  # unseen group

# ---- rf-features, last<k>, and the offline error tables (raytestbed/predict/evaluate.py)

def _hour_jobs(n, seed=0):
    """One group, one user: iterations depend only on the submit hour (day 1000, night 100)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        hour = int(rng.integers(24))
        j = job("g", "u", 1000 if 8 <= hour < 20 else 100, jid=i)
        j.extra.update(submit_hour=float(hour), sched_class=1.0)
        out.append(j)
    return out


def test_rf_features_use_what_group_and_user_cannot_see():
    from raytestbed.predict.evaluate import prediction_errors
    from raytestbed.predict.iterations import RandomForestPredictor

    train, test = _hour_jobs(300), _hour_jobs(100, seed=1)
    rows = {r["predictor"]: r for r in prediction_errors(train, test, seed=0, kinds=("rf", "rf-features", "median"))}
    assert rows["rf-features"]["mae_iterations"] < 5  # the hour separates day from night
    assert rows["rf"]["mae_iterations"] > 200 and rows["median"]["mae_iterations"] > 200
    rf = make_predictor("rf-features", seed=0).fit(["g"], ["u"], [7], {"gpus": [2], "submit_hour": [3]})
    assert rf.predict(["never"], ["u"], {"gpus": [2], "submit_hour": [3]})[0] == 0  # unseen group: 0
    from raytestbed.predict.iterations import job_features
    full = make_predictor("rf-features", seed=0).fit(["g"] * 300, ["u"] * 300, [j.iterations for j in train],
                                                     job_features(train))
    assert [full.predict_job(j) for j in test[:10]] == [j.iterations for j in test[:10]]
    with pytest.raises(ConfigError, match="rf features: 'colour' unknown"):
        RandomForestPredictor(features=("colour",))


def test_last_k_median_uses_only_the_latest_runs():
    p = make_predictor("last3").fit(["a"] * 6 + ["b"], ["u"] * 7, [1, 1, 1, 50, 60, 70, 9])
    assert p.predict(["a", "b", "c"], ["u"] * 3).tolist() == [60, 9, 0]
    assert make_predictor("median").fit(["a"] * 6, ["u"] * 6, [1, 1, 1, 50, 60, 70]).predict_one("a", "u") == 26
    with pytest.raises(ConfigError, match="k must be >= 1"):
        make_predictor("last0")
    with pytest.raises(ConfigError, match="unknown"):
        make_predictor("lastx")


def test_holdout_errors_split_the_window_in_order():
    from raytestbed.predict.evaluate import holdout_errors

    window = [job("a", iters=100, jid=i) for i in range(8)] + [job("b", iters=50, jid=8), job("a", iters=130, jid=9)]
    rows = holdout_errors(window, kinds=("mean", "last20"), train_share=0.8)
    assert [(r["train_jobs"], r["test_jobs"]) for r in rows] == [(8, 2), (8, 2)]
    assert rows[0]["unseen_share"] == 0.5  # group b is not in the first 8
    assert rows[0]["mae_iterations"] == pytest.approx((50 + 30) / 2)
    assert rows[0]["mae_seen_iterations"] == pytest.approx(30)  # group a only
    with pytest.raises(ValueError):
        holdout_errors(window, train_share=1.0)
