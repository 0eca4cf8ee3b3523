"""Offline errors of the iteration predictors (A-SRPT §V-B-2-d: mean absolute error per predictor).

:func:`prediction_errors` fits every predictor on a training set of jobs (their true
``iterations``, in the given order: the order of completion or submission) and scores it on
a test set; :func:`holdout_errors` does it for one window of jobs in submit order, fitted on
the earlier ``train_share`` and scored on the held-out later part.

Every predictor predicts 0 for a group it has not seen (A-SRPT's rule), so ``unseen_share``
bounds how much any of them can know.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from raytestbed.core.job import Job
from raytestbed.predict.iterations import job_features, make_predictor

#: the paper's three (rf, median, mean) plus the feature forest and the last-20-runs median
EVAL_PREDICTORS = ("rf", "rf-features", "median", "mean", "last20")


def prediction_errors(train: Sequence[Job], test: Sequence[Job], seed: int = 0,
                      kinds: Sequence[str] = EVAL_PREDICTORS) -> list[dict]:
    """One row per predictor: MAE |n - ñ| (iterations) over all test jobs and over those of groups seen in
    training (``mae_seen_iterations``), median absolute error, exact-hit share, unseen-group share, set sizes."""
    truth = np.array([j.iterations for j in test], dtype=float)
    seen = {j.group for j in train}
    known = np.array([j.group in seen for j in test], dtype=bool)
    unseen = float(np.mean(~known)) if len(test) else float("nan")
    out = []
    for kind in kinds:
        p = make_predictor(kind, seed)
        p.fit([j.group for j in train], [j.user for j in train], [j.iterations for j in train], job_features(train))
        pred = p.predict([j.group for j in test], [j.user for j in test], job_features(test)).astype(float)
        err = np.abs(pred - truth)
        out.append(dict(predictor=kind, mae_iterations=float(err.mean()) if err.size else float("nan"),
                        median_ae_iterations=float(np.median(err)) if err.size else float("nan"),
                        mae_seen_iterations=float(err[known].mean()) if known.any() else float("nan"),
                        exact_share=float(np.mean(err == 0)) if err.size else float("nan"),
                        unseen_share=unseen, train_jobs=len(train), test_jobs=len(test)))
    return out


def holdout_errors(window: Sequence[Job], seed: int = 0, train_share: float = 0.8,
                   kinds: Sequence[str] = EVAL_PREDICTORS) -> list[dict]:
    """:func:`prediction_errors` fitted on the first ``train_share`` of ``window`` (submit order), tested on the rest."""
    if not 0.0 < train_share < 1.0:
        raise ValueError(f"train_share must lie in (0, 1), got {train_share}")
    cut = int(round(train_share * len(window)))
    return prediction_errors(list(window[:cut]), list(window[cut:]), seed, kinds)
