"""Iteration-count predictors (A-SRPT §IV-C-3, §V-B-2-d).

Contract of every predictor::

    p = make_predictor("rf", seed=0)
    p.fit(groups, users, iterations)      # the completed jobs seen so far (may be empty)
    p.predict(groups, users)              # -> np.ndarray of int64 iterations >= 0
    p.predict_one(group, user)            # -> int

* ``rf``: scikit-learn ``RandomForestRegressor(n_estimators=100,
  criterion="squared_error")`` on (group id, user id), both ordinal codes fitted on
  the training set (an unseen user of a seen group gets code -1); predictions are
  rounded to the nearest integer >= 0. A job whose **group** is absent
  from the training data is predicted 0 (paper: it then finishes at once in the
  virtual instance).
* ``rf-features``: the same forest on (group id, user id) plus the numeric features
  ``FEATURES`` -- requested GPUs, local submit hour, the trace's scheduling class (what
  the paper's trace analysis names besides group and user, and what the Google trace
  carries); passed to ``fit`` / ``predict`` as ``features`` (name -> values; a
  missing value is -1), read from ``job.gpus`` and ``job.extra`` by ``predict_job``.
  Offline evaluation only (:mod:`raytestbed.predict.evaluate`): the online policies'
  history rows carry no features, so it is not in ``PREDICTORS``.
* ``mean`` / ``median``: the mean / median iterations of the group's completed
  jobs (rounded), 0 for an unseen group.
* ``last<k>`` (e.g. ``last20``): the median of the group's last k completed jobs
  (in the order given to ``fit``), 0 for an unseen group.
* ``perfect``: the true n_i (A-SRPT-Perfect); only through :meth:`predict_job`.

:class:`OnlinePredictor` wraps one of them for a scheduler: it collects completed
jobs and refits daily in trace time by default (the paper: "The high efficiency of forest
regression allows frequent retrainings (hourly/daily)", §IV-C-3), or every
``retrain_every`` completions when that is given.

The ``rf`` forest is fitted by :mod:`raytestbed.predict.forest`, which builds the trees
scikit-learn would build on the rows from the distinct (group, user) inputs: the same
predictions, bit for bit, at a small fraction of the cost (``RandomForestPredictor.engine``).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from raytestbed.core.job import Job
from raytestbed.errors import ConfigError


#: numeric features ``rf-features`` uses besides group and user (units: GPUs, hour 0..23, class 0..3)
FEATURES = ("gpus", "submit_hour", "sched_class")
Features = Mapping[str, Sequence[float]]


def job_features(jobs: Sequence[Job]) -> dict[str, list[float]]:
    """``FEATURES`` of each job: ``job.gpus`` and ``job.extra[name]`` (-1 where the trace has none)."""
    out: dict[str, list[float]] = {name: [] for name in FEATURES}
    for j in jobs:
        out["gpus"].append(float(j.gpus))
        for name in FEATURES[1:]:
            v = j.extra.get(name)
            out[name].append(-1.0 if v is None else float(v))
    return out


class IterationPredictor:
    """Base class: predicts n_i from (group id, user id) and, for some, ``features``."""

    name = "base"
    needs_truth = False  #: True for ``perfect``: reads the job's true iterations

    def fit(self, groups: Sequence[str], users: Sequence[str], iterations: Sequence[int],
            features: Features | None = None) -> "IterationPredictor":
        raise NotImplementedError

    def predict(self, groups: Sequence[str], users: Sequence[str], features: Features | None = None) -> np.ndarray:
        raise NotImplementedError

    def fit_rows(self, rows: "CompletedRows") -> "IterationPredictor":
        """:meth:`fit` on the rows an :class:`OnlinePredictor` collected (a predictor may use their
        numbering of distinct (group, user) inputs)."""
        return self.fit(rows.groups, rows.users, rows.iterations)

    def predict_one(self, group: str, user: str) -> int:
        return int(self.predict([group], [user])[0])

    def predict_job(self, job: Job) -> int:
        """ñ_i for one job (uses only its group and user, except ``perfect`` and ``rf-features``)."""
        return self.predict_one(job.group, job.user)


def _round(x: np.ndarray) -> np.ndarray:
    return np.maximum(0, np.rint(np.asarray(x, dtype=float))).astype(np.int64)


class RandomForestPredictor(IterationPredictor):
    """Random-forest regression on (group id, user id): 100 trees, MSE (A-SRPT §IV-C-3).

    Args:
        seed: ``random_state`` of the forest.
        n_estimators: trees (paper: 100).
        n_jobs: worker threads of scikit-learn (1 by default: deterministic and
            polite on a shared machine).
        features: numeric features (names of ``FEATURES``) used besides group and user;
            () = the paper's predictor ``rf``, ``FEATURES`` = ``rf-features``.

    ``engine`` (class attribute): ``"exact"`` (default) fits ``rf`` with
    :func:`raytestbed.predict.forest.fit` -- scikit-learn's forest, grown on distinct inputs --
    and falls back to scikit-learn where its exactness bound fails or extra features are used;
    ``"sklearn"`` always calls scikit-learn (the reference ``raytestbed bench sim --forest
    sklearn`` measures against). Both predict identical values.
    """

    engine = "exact"

    def __init__(self, seed: int = 0, n_estimators: int = 100, n_jobs: int = 1,
                 features: Sequence[str] = ()) -> None:
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ConfigError(f"rf features: {unknown[0]!r} unknown (known: {', '.join(FEATURES)})")
        self.seed = seed
        self.n_estimators = n_estimators
        self.n_jobs = n_jobs
        self.features = tuple(features)
        self.name = "rf-features" if self.features else "rf"
        self._model = None
        self._gcode: dict[str, int] = {}
        self._ucode: dict[str, int] = {}
        self._cache: dict[tuple, int] = {}
        self._asked = 0  #: keys predicted one call at a time since the last fit (exact forest)
        self.batch_fits = 0  #: fits after which every known key was predicted at once
        self.sklearn_fits = 0  #: fits made by scikit-learn (engine "sklearn", extra features, or the exact bound declined)

    #: the exact forest predicts every known key at a refit when they number at most this many times
    #: the keys asked one by one since the previous fit: one call costs about ten rows of a batch
    #: (each call walks 100 trees from cold memory), so the batch is then the cheaper way to the
    #: same values
    BATCH_RATIO = 8

    def _keys(self, groups, users, features: Features | None) -> list[tuple]:
        """One key per row: (group, user, *feature values); the forest's input is a function of it."""
        n = len(groups)
        cols = []
        for f in self.features:
            vals = None if features is None else features.get(f)
            if vals is not None and len(vals) != n:
                raise ValueError(f"feature {f!r}: {len(vals)} values for {n} rows")
            cols.append([-1.0] * n if vals is None else [float(v) for v in vals])
        return list(zip(groups, users, *cols))

    def fit(self, groups, users, iterations, features=None):
        groups, users = list(map(str, groups)), list(map(str, users))
        if not (len(groups) == len(users) == len(iterations)):
            raise ValueError("groups, users and iterations must have the same length")
        if not self.features:
            rows = CompletedRows()
            for g, u, n in zip(groups, users, iterations):
                rows.add(g, u, n)
            return self.fit_rows(rows)
        y = np.asarray(iterations, dtype=float)
        self._gcode = {g: i for i, g in enumerate(sorted(set(groups)))}
        self._ucode = {u: i for i, u in enumerate(sorted(set(users)))}
        self._cache = {}
        if not groups:
            self._model = None
            return self
        keys = self._keys(groups, users, features)
        self._fit_encoded(self._encode(keys), None, y, lambda: sorted(set(keys)))
        return self

    def fit_rows(self, rows: "CompletedRows") -> "RandomForestPredictor":
        """Fit on (group, user) alone from the rows' distinct inputs: the codes are made once per
        distinct pair, the rows stay indices into them (the same forest as on every row)."""
        if self.features:
            return self.fit(rows.groups, rows.users, rows.iterations)
        points = rows.points
        self._gcode = {g: i for i, g in enumerate(sorted({g for g, _ in points}))}
        self._ucode = {u: i for i, u in enumerate(sorted({u for _, u in points}))}
        self._cache = {}
        if not points:
            self._model = None
            return self
        codes = np.array([(self._gcode[g], self._ucode[u]) for g, u in points], dtype=float)
        self._fit_encoded(codes, rows.point_of_row(), np.asarray(rows.iterations, dtype=float),
                          lambda: sorted(points))
        return self

    def _fit_encoded(self, inputs: np.ndarray, input_of_row: np.ndarray | None, y: np.ndarray,
                     known: Callable[[], list[tuple]]) -> None:
        """Fit the forest on the rows ``inputs[input_of_row]`` (``inputs`` itself when None).

        scikit-learn's predictions of every known key (``known()``, sorted) are cached now, in one call
        (its ``predict`` costs about a millisecond per call); the exact forest predicts a key when it is
        first asked, or, when the known keys are at most :attr:`BATCH_RATIO` times the keys asked one
        by one since the previous fit, every known key at once now (the same values either way)."""
        self._model = None
        asked, self._asked = self._asked, 0
        if self.engine == "exact" and not self.features:
            from raytestbed.predict import forest  # numba kernels: compiled or loaded from cache on first use

            rows = np.arange(len(inputs)) if input_of_row is None else input_of_row
            self._model = forest.fit_grouped(inputs, rows, y, n_estimators=self.n_estimators, seed=self.seed)
            if self._model is not None:
                keys = known()
                if keys and len(keys) <= self.BATCH_RATIO * asked:
                    vals = _round(self._model.predict(self._encode(keys)))
                    self._cache = dict(zip(keys, (int(v) for v in vals)))
                    self.batch_fits += 1
                return
        from sklearn.ensemble import RandomForestRegressor  # seconds to import: only where it fits

        self.sklearn_fits += 1
        X = inputs if input_of_row is None else inputs[input_of_row]
        self._model = RandomForestRegressor(n_estimators=self.n_estimators, criterion="squared_error",
                                            random_state=self.seed, n_jobs=self.n_jobs)
        self._model.fit(X, y)
        keys = known()
        vals = _round(self._model.predict(self._encode(keys)))
        self._cache = dict(zip(keys, (int(v) for v in vals)))

    def _encode(self, keys: Sequence[tuple]) -> np.ndarray:
        width = 2 + len(self.features)
        return np.array([[self._gcode.get(k[0], -1), self._ucode.get(k[1], -1), *k[2:]] for k in keys],
                        dtype=float).reshape(-1, width)

    def predict(self, groups, users, features=None):
        """Predictions are cached per (group, user, features) until the next fit."""
        groups, users = list(map(str, groups)), list(map(str, users))
        keys = self._keys(groups, users, features)
        out = np.zeros(len(groups), dtype=np.int64)
        todo = sorted({k for k in keys if k[0] in self._gcode and k not in self._cache})
        if todo and self._model is not None:
            self._asked += len(todo)
            vals = _round(self._model.predict(self._encode(todo)))
            self._cache.update(zip(todo, (int(v) for v in vals)))
        for i, k in enumerate(keys):
            if k[0] in self._gcode:  # an unseen group stays 0
                out[i] = self._cache.get(k, 0)
        return out

    def predict_one(self, group: str, user: str) -> int:
        """:meth:`predict` of one row; a cached (group, user) costs one lookup."""
        if not self.features:
            key = (str(group), str(user))
            if key[0] not in self._gcode:
                return 0  # an unseen group
            v = self._cache.get(key)
            if v is not None:
                return v
        return int(self.predict([group], [user])[0])

    def predict_job(self, job: Job) -> int:
        if not self.features:
            return self.predict_one(job.group, job.user)
        return int(self.predict([job.group], [job.user], job_features([job]))[0])


class GroupStatPredictor(IterationPredictor):
    """Per-group mean or median of completed jobs' iterations; 0 for an unseen group."""

    def __init__(self, stat: str = "mean") -> None:
        if stat not in ("mean", "median"):
            raise ValueError(f"stat must be mean or median, got {stat!r}")
        self.name = stat
        self._value: dict[str, int] = {}

    def fit(self, groups, users, iterations, features=None):
        per: dict[str, list[float]] = {}
        for g, n in zip(groups, iterations):
            per.setdefault(str(g), []).append(float(n))
        f = np.mean if self.name == "mean" else np.median
        self._value = {g: int(_round(f(v))) for g, v in per.items()}
        return self

    def predict(self, groups, users, features=None):
        return np.array([self._value.get(str(g), 0) for g in groups], dtype=np.int64)


class LastKMedianPredictor(IterationPredictor):
    """Median iterations of the group's last ``k`` completed jobs (in ``fit`` order); 0 for an unseen group."""

    def __init__(self, k: int = 20) -> None:
        if int(k) < 1:
            raise ConfigError(f"last<k>: k must be >= 1, got {k}")
        self.k = int(k)
        self.name = f"last{self.k}"
        self._value: dict[str, int] = {}

    def fit(self, groups, users, iterations, features=None):
        per: dict[str, list[float]] = {}
        for g, n in zip(groups, iterations):
            per.setdefault(str(g), []).append(float(n))
        self._value = {g: int(_round(np.median(v[-self.k:]))) for g, v in per.items()}
        return self

    def predict(self, groups, users, features=None):
        return np.array([self._value.get(str(g), 0) for g in groups], dtype=np.int64)


class PerfectPredictor(IterationPredictor):
    """ñ_i = n_i: the true iteration count (A-SRPT-Perfect, §V-A-2)."""

    name = "perfect"
    needs_truth = True

    def fit(self, groups, users, iterations, features=None):
        return self

    def predict(self, groups, users, features=None):
        raise TypeError("the perfect predictor needs the job (predict_job), not (group, user)")

    def predict_job(self, job: Job) -> int:
        return int(job.iterations)


class GivenPredictor(IterationPredictor):
    """Uses ``job.predicted_iterations`` set by the workload (e.g. an offline-trained model)."""

    name = "given"

    def fit(self, groups, users, iterations, features=None):
        return self

    def predict(self, groups, users, features=None):
        raise TypeError("the given predictor reads job.predicted_iterations (predict_job)")

    def predict_job(self, job: Job) -> int:
        if job.predicted_iterations is None:
            raise ConfigError(f"predictor 'given': job {job.job_id} has no predicted_iterations")
        return max(0, int(job.predicted_iterations))


PREDICTORS = ("rf", "mean", "median", "perfect", "given")  #: the ones a policy may use online


def make_predictor(kind: str, seed: int = 0) -> IterationPredictor:
    """A predictor by name: ``rf``, ``mean``, ``median``, ``perfect``, ``given``, ``rf-features`` or ``last<k>``."""
    if kind == "rf":
        return RandomForestPredictor(seed=seed)
    if kind == "rf-features":
        return RandomForestPredictor(seed=seed, features=FEATURES)
    if kind.startswith("last") and kind[4:].isdigit():
        return LastKMedianPredictor(int(kind[4:]))
    if kind in ("mean", "median"):
        return GroupStatPredictor(kind)
    if kind == "perfect":
        return PerfectPredictor()
    if kind == "given":
        return GivenPredictor()
    raise ConfigError(f"predictor {kind!r}: unknown (known: {', '.join(PREDICTORS)}, rf-features, last<k>)")


class CompletedRows:
    """Completed jobs as (group, user, iterations) rows, each row's (group, user) pair numbered
    once when first seen (``points``, ``point_of_row``): a refit of the random forest then reads
    the few distinct pairs, not every row's names."""

    def __init__(self) -> None:
        self.groups: list[str] = []
        self.users: list[str] = []
        self.iterations: list[int] = []
        self.points: list[tuple[str, str]] = []  #: distinct (group, user), in order of first appearance
        self._point_id: dict[tuple[str, str], int] = {}
        self._row_point = array("q")

    def __len__(self) -> int:
        return len(self.iterations)

    def add(self, group: str, user: str, iterations: int) -> None:
        key = (str(group), str(user))
        pid = self._point_id.get(key)
        if pid is None:
            pid = self._point_id[key] = len(self.points)
            self.points.append(key)
        self.groups.append(key[0])
        self.users.append(key[1])
        self.iterations.append(int(iterations))
        self._row_point.append(pid)

    def point_of_row(self) -> np.ndarray:
        """Index into ``points`` of every row (int64)."""
        return np.frombuffer(self._row_point, dtype=np.int64).copy()


DAY_S = 86_400.0  #: the default refit period, seconds of trace time


class OnlinePredictor:
    """A predictor fed by job completions and refitted on a schedule.

    Schedules: by default every ``retrain_every_s`` seconds of trace time (daily; the paper
    retrains "hourly/daily", §IV-C-3): at the first completion or prediction at or after each
    multiple of ``retrain_every_s``, the model is refitted on every job that completed before
    it (if any completed since the last fit). With ``retrain_every`` given, instead after every
    ``retrain_every`` completions.

    Args:
        kind: predictor name (:func:`make_predictor`).
        retrain_every: refit after this many new completions (>= 1); None: the time schedule.
        seed: seed of the random forest.
        history: optional (group, user, iterations) rows known before the run
            (e.g. the earlier part of a trace); fitted at construction.
        retrain_every_s: the time schedule's period, seconds (> 0).
    """

    def __init__(self, kind: str = "rf", retrain_every: int | None = None, seed: int = 0,
                 history: Sequence[tuple[str, str, int]] = (), retrain_every_s: float = DAY_S) -> None:
        if retrain_every is not None and int(retrain_every) < 1:
            raise ConfigError(f"retrain_every must be >= 1, got {retrain_every}")
        if not float(retrain_every_s) > 0:
            raise ConfigError(f"retrain_every_s must be > 0, got {retrain_every_s}")
        self.kind = kind
        self.model = make_predictor(kind, seed)
        self.retrain_every = None if retrain_every is None else int(retrain_every)
        self.retrain_every_s = float(retrain_every_s)
        self._next_fit_s = self.retrain_every_s  #: the next refit time of the time schedule, s
        self._rows = CompletedRows()
        self._new = 0
        self.fits = 0
        for g, u, n in history:
            self._add(g, u, n)
        if len(self._rows) and not self.model.needs_truth:
            self._refit()

    @classmethod
    def for_policy(cls, policy: str, kind: str, retrain_every: int | None, retrain_every_s: float, seed: int,
                   history: Sequence[Sequence]) -> OnlinePredictor:
        """The predictor a policy named ``policy`` builds from its parameters (``predictor``,
        ``retrain_every``, ``retrain_every_s``, ``history`` rows (group, user, iterations)), checked with
        one-line errors that name ``policy_params.POLICY.FIELD``."""
        where = f"policy_params.{policy}"
        if kind not in PREDICTORS:
            raise ConfigError(f"{where}.predictor: {kind!r} unknown (known: {', '.join(PREDICTORS)})")
        if retrain_every is not None and int(retrain_every) < 1:
            raise ConfigError(f"{where}.retrain_every: must be >= 1, got {retrain_every!r}")
        if not retrain_every_s > 0:
            raise ConfigError(f"{where}.retrain_every_s: must be > 0, got {retrain_every_s!r}")
        return cls(kind, None if retrain_every is None else int(retrain_every), seed,
                   [(str(g), str(u), int(n)) for g, u, n in history], float(retrain_every_s))

    def stats(self) -> dict[str, int]:
        """For a run's ``summary.json``: ``predictor_fits`` (fits made, the history's included) and, for
        the random forest, ``predictor_fits_sklearn``: how many of them scikit-learn made, where the
        exact forest declined (:mod:`raytestbed.predict.forest`; the predictions are the same). Nothing for
        ``perfect``, which reads the truth and never fits."""
        if self.model.needs_truth:
            return {}
        out = {"predictor_fits": self.fits}
        if isinstance(self.model, RandomForestPredictor):
            out["predictor_fits_sklearn"] = self.model.sklearn_fits
        return out

    def _add(self, group: str, user: str, iterations: int) -> None:
        self._rows.add(group, user, iterations)
        self._new += 1

    def _refit(self) -> None:
        self.model.fit_rows(self._rows)
        self._new = 0
        self.fits += 1

    def _tick(self, now_s: float) -> bool:
        """Time schedule: refit if a refit time passed (on the jobs completed before ``now_s``)."""
        if self.retrain_every is not None or now_s < self._next_fit_s:
            return False
        self._next_fit_s = (math.floor(now_s / self.retrain_every_s) + 1) * self.retrain_every_s
        if self._new and not self.model.needs_truth:
            self._refit()
            return True
        return False

    def observe(self, job: Job, iterations: int, now_s: float = 0.0) -> bool:
        """Record a job that completed at ``now_s`` (seconds); refit when due. True if it refitted."""
        if self.kind in ("perfect", "given"):
            return False
        refit = self._tick(now_s)
        self._add(job.group, job.user, iterations)
        if self.retrain_every is not None and self._new >= self.retrain_every:
            self._refit()
            return True
        return refit

    def predict(self, job: Job, now_s: float = 0.0) -> int:
        """ñ_i for a job arriving at ``now_s`` (seconds)."""
        if self.kind not in ("perfect", "given"):
            self._tick(now_s)
        return self.model.predict_job(job)
