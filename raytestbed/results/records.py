"""Per-job records and the trial summary (the columns of ``jobs.csv`` and ``summary.json``).

Metrics (seconds): JCT of a job = finish - arrival (A-SRPT's "job flow time");
total JCT = sum over finished jobs; makespan = last finish - first arrival.
Decision times are the wall seconds of every ``on_event`` call of every policy.
Each paper's objective is a summary column where it applies: ``total_utility`` (GADGET),
``avg_cct_s`` / ``p95_cct_s`` (coflows, flow timing), ``ratio_to_lb`` = total JCT / total
lower bound (Parrot Thm 3, flow timing); see :mod:`raytestbed.results.objectives`.
``predicted_iterations``: the iteration count the policy predicted when the job arrived
(``Policy.predictions``, copied into the record by the backend), else the workload's
``Job.predicted_iterations``, else empty.
``coflow_width``, ``coflow_longest_bytes``, ``varys_bin``: for a job with one explicit coflow (a
coflow-trace job, e.g. ``fb_coflow``; its JCT is its coflow completion time, CCT) the coflow's
number of flows, its largest flow (bytes) and its Varys bin: S(hort) if the largest flow is below
5 MiB else L(ong), N(arrow) if it has at most 50 flows else W(ide); empty for other jobs.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from raytestbed.results.queueing import queue_gpus_free

JOB_COLUMNS = [
    "job_id", "status", "arrival_s", "first_start_s", "finish_s", "jct_s", "queue_s",
    "gpus", "servers", "iterations", "predicted_iterations", "iteration_time_s",
    "preemptions", "failures", "gpu_seconds", "model", "comm", "stages", "user", "group", "placement",
    "lower_bound_s", "coflow_width", "coflow_longest_bytes", "varys_bin",
]

#: Varys bins (Chowdhury et al., SIGCOMM 2014): short if the longest flow is below this (bytes; the
#: trace's 5 MB read as MiB, as CoflowSim reads sizes), narrow if at most this many flows
VARYS_SHORT_BYTES = 5 * 1048576.0
VARYS_NARROW_FLOWS = 50


def coflow_shape(job: Any) -> tuple[Any, Any, str]:
    """(flows, largest flow bytes, Varys bin) of a job with exactly one explicit coflow, else ("", "", "")."""
    t = getattr(job, "traffic", None)
    cfs = getattr(t, "coflows", None) if t is not None else None
    if not cfs or len(cfs) != 1 or not cfs[0]:
        return "", "", ""
    flows = cfs[0]
    longest = max(b for _, _, b in flows)
    return (len(flows), longest, ("S" if longest < VARYS_SHORT_BYTES else "L")
            + ("N" if len(flows) <= VARYS_NARROW_FLOWS else "W"))

SUMMARY_KEYS = [
    "policy", "network_policy", "backend", "timing", "jobs", "finished", "unfinished",
    "total_jct_s", "avg_jct_s", "median_jct_s", "makespan_s", "gpu_utilisation",
    "total_queue_s", "queue_gpus_free_s", "total_utility", "coflows", "avg_cct_s", "p95_cct_s",
    "total_lower_bound_s", "ratio_to_lb",
    "decision_time_p50_s", "decision_time_p99_s", "decision_calls", "events", "wall_s", "seed",
    "note",  # a resumed run only: "resumed: ..." or "resumed, not comparable: ..." (docs/trials.md, "Resume")
]


def job_rows(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Turn backend job records into rows with :data:`JOB_COLUMNS`."""
    rows = []
    for r in records:
        j = r.job
        finished = not math.isnan(r.finish_s)
        rows.append({
            "job_id": j.job_id,
            "status": "finished" if finished else "unfinished",
            "arrival_s": j.arrival_s,
            "first_start_s": r.first_start_s,
            "finish_s": r.finish_s,
            "jct_s": r.finish_s - j.arrival_s if finished else math.nan,
            "queue_s": r.first_start_s - j.arrival_s,
            "gpus": j.gpus,
            "servers": r.servers,
            "iterations": j.iterations,
            "predicted_iterations": _predicted(r),
            "iteration_time_s": r.iteration_time_s,
            "preemptions": r.preemptions,
            "failures": r.failures,
            "gpu_seconds": r.gpu_seconds,
            "model": j.model,
            "comm": j.comm.value,
            "stages": "x".join(str(k) for k in j.replicas()),
            "user": j.user,
            "group": j.group,
            "placement": r.placement,
            "lower_bound_s": getattr(r, "lower_bound_s", math.nan),
        })
        rows[-1]["coflow_width"], rows[-1]["coflow_longest_bytes"], rows[-1]["varys_bin"] = coflow_shape(j)
    return rows


def _predicted(r: Any) -> int | str:
    """The policy's prediction at arrival, else the workload's ``job.predicted_iterations``, else ""."""
    n = getattr(r, "predicted_iterations", None)
    if n is None:
        n = r.job.predicted_iterations
    return "" if n is None else int(n)


def summarize(
    rows: Sequence[dict[str, Any]],
    decision_times_s: np.ndarray,
    total_gpus: int,
    intervals: pd.DataFrame | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """The summary of one trial; ``meta`` supplies policy, backend, timing, events, wall_s, seed...

    ``total_queue_s``: the started jobs' summed queueing delay (arrival to first start, s);
    ``queue_gpus_free_s``: the part of it during which the cluster had at least the waiting job's GPU
    count free, from the busy-GPU ``intervals`` (job_id, start_s, end_s, gpus; see
    :mod:`raytestbed.results.queueing`), present when they are given."""
    df = pd.DataFrame(rows, columns=JOB_COLUMNS)
    fin = df[df["status"] == "finished"]
    jct = fin["jct_s"].astype(float)
    makespan = float(fin["finish_s"].max() - df["arrival_s"].min()) if len(fin) else math.nan
    gpu_sec = float(df["gpu_seconds"].astype(float).sum())
    util = gpu_sec / (total_gpus * makespan) if len(fin) and makespan > 0 else math.nan
    dt = np.asarray(decision_times_s, dtype=float)
    out: dict[str, Any] = {
        "jobs": int(len(df)),
        "finished": int(len(fin)),
        "unfinished": int(len(df) - len(fin)),
        "unfinished_jobs": [int(j) for j in df.loc[df["status"] != "finished", "job_id"]],
        "total_jct_s": float(jct.sum()),
        "avg_jct_s": float(jct.mean()) if len(fin) else math.nan,
        "median_jct_s": float(jct.median()) if len(fin) else math.nan,
        "makespan_s": makespan,
        "gpu_utilisation": util,
        "total_queue_s": float(pd.to_numeric(df["queue_s"], errors="coerce").sum()),
        "decision_time_p50_s": float(np.percentile(dt, 50)) if dt.size else 0.0,
        "decision_time_p99_s": float(np.percentile(dt, 99)) if dt.size else 0.0,
        "decision_calls": int(dt.size),
    }
    lb = df["lower_bound_s"].astype(float) if "lower_bound_s" in df else pd.Series(dtype=float)
    if len(fin) and lb.notna().any():
        # Parrot Thm 3: sum over jobs of (sum of O3 CCTs + compute); JCT = finish - arrival
        out["total_lower_bound_s"] = float(lb[fin.index].sum())
        if out["total_lower_bound_s"] > 0:
            out["ratio_to_lb"] = out["total_jct_s"] / out["total_lower_bound_s"]
    if intervals is not None:
        out["queue_gpus_free_s"] = float(queue_gpus_free(df, intervals, total_gpus).sum())
    out["total_gpus"] = total_gpus
    out.update(meta)
    ordered = {k: out[k] for k in SUMMARY_KEYS if k in out}
    ordered.update({k: v for k, v in out.items() if k not in ordered})
    return ordered


#: a list, tuple, set or mapping with more items than this is recorded by its length only
PARAM_ITEMS_MAX = 16


def params_record(params: dict[str, Any]) -> dict[str, Any]:
    """Policy parameters (``Policy.get_params()``) as JSON values for ``summary.json``.

    Numbers, strings, booleans and None are kept; an enum by its value; a sequence or mapping
    of at most :data:`PARAM_ITEMS_MAX` items item by item, a longer one as ``{"items": N}``
    (e.g. A-SRPT's predictor ``history`` rows); any other object as ``"<module.Class>"``.
    """
    return {str(k): _param_value(v) for k, v in params.items()}


def _param_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, enum.Enum):
        return _param_value(v.value)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, dict):
        if len(v) > PARAM_ITEMS_MAX:
            return {"items": len(v)}
        return {str(k): _param_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        if len(v) > PARAM_ITEMS_MAX:
            return {"items": len(v)}
        items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v
        return [_param_value(x) for x in items]
    return f"<{type(v).__module__}.{type(v).__qualname__}>"
