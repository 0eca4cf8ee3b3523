"""The exact forest (raytestbed/predict/forest.py) against scikit-learn's RandomForestRegressor."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from raytestbed.predict import forest


def _data(rng, n, groups, users, ymax, dup):
    g = rng.zipf(1.4, n) % groups
    u = (g * 7 + rng.integers(0, 2, n) * (rng.random(n) < 0.1)) % users
    y = rng.integers(0, ymax, n).astype(float)
    if dup:  # recurring jobs with identical targets (pure nodes, ties between splits)
        y = np.where(rng.random(n) < 0.5, (g * 13) % 50, y)
    X = np.c_[g, u].astype(float)
    return X, y


@pytest.mark.parametrize("case", range(12))
def test_exact_forest_predicts_what_sklearn_predicts(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(1, 3000))
    X, y = _data(rng, n, int(rng.integers(1, 300)), int(rng.integers(1, 40)), int(rng.integers(1, 30000)),
                 dup=case % 2 == 0)
    seed = int(rng.integers(0, 1000))
    n_est = 100 if case < 4 else 10
    ref = RandomForestRegressor(n_estimators=n_est, criterion="squared_error", random_state=seed, n_jobs=1).fit(X, y)
    ours = forest.fit(X, y, n_estimators=n_est, seed=seed)
    assert ours is not None
    # every training input, unseen users of seen groups (code -1), unseen inputs around them
    gs = np.unique(X[:, 0])
    q = np.unique(np.r_[X, np.c_[gs, -np.ones_like(gs)], np.c_[gs + 0.5, np.full_like(gs, 3.0)],
                        np.c_[[-1.0, 1e6], [0.0, -1.0]]], axis=0)
    np.testing.assert_array_equal(ours.predict(q), ref.predict(q))


def _queries(X):
    gs = np.unique(X[:, 0])
    return np.unique(np.r_[X, np.c_[gs, -np.ones_like(gs)], np.c_[gs + 0.5, np.full_like(gs, 3.0)]], axis=0)


@pytest.mark.parametrize("case", range(6))
def test_targets_of_millions_are_still_exact(case):
    """Targets whose squares sum past 2**53 (AAIC jobs of millions of iterations): every decision on
    those sums is taken outside its rounding bound here, so the forest is built and equals scikit-learn's."""
    rng = np.random.default_rng(100 + case)
    n = int(rng.integers(2000, 6000))
    X, y = _data(rng, n, int(rng.integers(50, 300)), int(rng.integers(5, 40)), 30000, dup=False)
    y = np.where(rng.random(n) < 0.05, rng.integers(10**6, 10**8, n), y).astype(float)
    assert float(n) * y.max() ** 2 > 2.0 ** 53  # beyond the old all-rows bound
    seed = int(rng.integers(0, 1000))
    ref = RandomForestRegressor(n_estimators=10, random_state=seed, n_jobs=1).fit(X, y)
    ours = forest.fit(X, y, n_estimators=10, seed=seed)
    assert ours is not None
    q = _queries(X)
    np.testing.assert_array_equal(ours.predict(q), ref.predict(q))


def test_an_undecidable_pure_node_falls_back_to_sklearn():
    """A pure node of huge targets: its exact impurity is 0, scikit-learn's rounded one depends on its row
    order, so the exact forest declines (None) and the predictor's fit is scikit-learn's own."""
    from raytestbed.predict.iterations import RandomForestPredictor

    groups = [str(i % 40) for i in range(4000)]
    users = ["u"] * 4000
    iters = [10**8 if g == "3" else 1000 + 37 * int(g) + i % 5 for i, g in enumerate(groups)]
    X = np.c_[[float(g) for g in groups], np.zeros(4000)]
    assert forest.fit(X, np.asarray(iters, float), n_estimators=5, seed=2) is None
    p = RandomForestPredictor(seed=2, n_estimators=5).fit(groups, users, iters)
    ref = RandomForestRegressor(n_estimators=5, random_state=2, n_jobs=1).fit(X, np.asarray(iters, float))
    want = np.maximum(0, np.rint(ref.predict(np.c_[np.arange(40.0), np.zeros(40)]))).astype(int)
    assert list(p.predict([str(g) for g in range(40)], ["u"] * 40)) == list(want)
    assert p.sklearn_fits == 1  # counted, for summary.json's predictor_fits_sklearn
    assert RandomForestPredictor(seed=2, n_estimators=5).fit(groups[:3000], users[:3000], [1000 + i % 7 for i in range(3000)]).sklearn_fits == 0


def test_a_run_summary_counts_the_predictor_fits():
    """A-SRPT and an ordering baseline report their predictor's fits and how many scikit-learn made."""
    from conftest import small_cluster
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator
    from test_asrpt import plain

    jobs = [plain(i, float(i), 1, 10 + i % 3, group=f"g{i % 2}") for i in range(6)]
    history = [["g0", "u", 10], ["g1", "u", 11]]
    for name in ("asrpt", "wcs-duration"):
        pol = make_policy(name, predictor="rf", retrain_every=2, history=history)
        Simulator(small_cluster(servers=1, gpus=2), jobs, pol).run()
        stats = pol.run_stats()
        assert stats["predictor_fits"] == 1 + 3, name  # the history, then after every 2 of 6 completions
        assert stats["predictor_fits_sklearn"] == 0, name
    assert "predictor_fits" not in make_policy("wcs-subtime").run_stats()  # predicts nothing


def test_bound_rejects_what_would_not_be_exact():
    assert not forest.exact_bound_holds(np.array([1.5, 2.0]))
    assert not forest.exact_bound_holds(np.array([1e13] * 1000))
    assert forest.exact_bound_holds(np.array([1e8] * 1000))
    assert forest.exact_bound_holds(np.array([20000.0] * 150000))
    assert forest.fit(np.zeros((2, 2)), np.array([0.5, 1.0])) is None


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 65536, 65537, 100_003])
def test_bootstrap_counts_are_numpys_draws(n):
    for s in (0, 12345, 2**31 - 2):
        ref = np.bincount(np.random.RandomState(s).randint(0, n, n), minlength=n)
        np.testing.assert_array_equal(forest._bootstrap_counts(s, n), ref)
        assert forest._splitter_seed(s) == np.random.RandomState(s).randint(0, forest.RAND_R_MAX)


def test_bootstrap_sums_are_the_rows_sums():
    rng = np.random.default_rng(1)
    n, points = 5000, 37
    por = rng.integers(0, points, n)
    y = rng.integers(0, 20000, n).astype(float)
    for s in (3, 99):
        c = np.bincount(np.random.RandomState(s).randint(0, n, n), minlength=n)
        W, S, Q, C = forest._point_sums(por, y, c, points)
        np.testing.assert_array_equal(W, np.bincount(por, weights=c, minlength=points))
        np.testing.assert_array_equal(S, np.bincount(por, weights=c * y, minlength=points))
        np.testing.assert_array_equal(Q, np.bincount(por, weights=c * y * y, minlength=points))
        np.testing.assert_array_equal(C, np.bincount(por, weights=c > 0, minlength=points))
