"""When can ``wcs-duration`` and ``wcs-workload`` decide differently? (diagnostic)

Both are work-conserving list schedulers (raytestbed/schedulers/asrpt_baselines.py): at every
scheduling call they walk their queue in key order and start every job that still fits, taking
GPUs from the servers with the most free GPUs. Their keys differ only by the factor g_i
(duration ñ_i·α̃min_i vs workload g_i·ñ_i·α̃min_i), so the two can only decide differently in a
call where (1) at least two jobs wait, (2) the two keys order them differently (which needs a
multi-GPU job with a non-zero prediction), and (3) the walk in the other order starts a
different set of jobs or gives a job other GPUs.

``raytestbed bench wcs-orders`` runs ``wcs-duration`` on a trial (simulator, the trial's
policy_params and predictor history, as ``raytestbed compare`` does) and, at each of its
scheduling calls, replays the call's walk in the ``wcs-workload`` order on a scratch pool. It counts the calls
at each of the three steps. If no call reaches step 3, ``wcs-workload`` takes the same
decisions at every call (same state, same predictions, by induction) and its ``jobs.csv``
must be byte-identical; it then runs ``wcs-workload`` and compares the files.

    raytestbed bench wcs-orders workloads/trials/asrpt_aaic_paper.yaml --seeds 1,2,3,4
    .venv/bin/python scripts/diag_wcs_orders.py workloads/trials/asrpt_aaic_paper.yaml --seeds 1,2,3,4

Findings: docs/asrpt.md ("wcs-duration and wcs-workload often write byte-identical jobs.csv files").
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from raytestbed.config import load_trial
from raytestbed.core.state import FreePool
from raytestbed.placement.select import most_available
from raytestbed.schedulers import asrpt_baselines as ab
from raytestbed.trial import PolicyPair, run_into


def _walk(queue, view) -> list:
    """The (job, servers and GPUs) a work-conserving walk over ``queue`` starts (the policy's loop)."""
    pool = FreePool(view)
    out = []
    for _, _, jid in queue:
        job = view.pending[jid]
        if job.gpus > pool.total_free:
            if pool.total_free == 0:
                break
            continue
        sel = most_available(pool.free_count, job.gpus)
        out.append((jid, tuple((m, tuple(pool.take(m, c))) for m, c in sel)))
    return sorted(out)


def shadow(counts: Counter):
    """Wrap PredictedQueuePolicy._schedule: count, for wcs-duration calls, the steps of the module docstring."""
    orig = ab.PredictedQueuePolicy._schedule

    def _schedule(self, view):
        if self.name == "wcs-duration" and self._queue and view.total_free > 0:
            counts["calls"] += 1
            if len(self._queue) >= 2:
                counts["two_or_more_waiting"] += 1
                other = sorted(((float(view.pending[j].gpus * self.predictions[j] * self._est.bounds(view.pending[j])[0]),
                                 a, j) for _, a, j in self._queue))
                if [j for *_, j in other] != [j for *_, j in self._queue]:
                    counts["orders_differ"] += 1
                    if _walk(other, view) != _walk(self._queue, view):
                        counts["decisions_differ"] += 1
        return orig(self, view)

    ab.PredictedQueuePolicy._schedule = _schedule
    return orig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trial")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--jobs", type=int, default=None, help="override workload.jobs")
    a = ap.parse_args(argv)
    loaded = load_trial(a.trial)
    if a.jobs is not None:
        wl = loaded.trial.workload.model_copy(update={"jobs": a.jobs})
        loaded = loaded.model_copy(update={"trial": loaded.trial.model_copy(update={"workload": wl})})
    print("seed  calls  2+waiting  orders_differ  decisions_differ  jobs.csv")
    for seed in (int(s) for s in a.seeds.split(",")):
        counts: Counter = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            orig = shadow(counts)
            try:
                run_into(Path(tmp) / "d", loaded, PolicyPair("wcs-duration"), seed, "sim", show_progress=False,
                         log_events=False, report=False)
            finally:
                ab.PredictedQueuePolicy._schedule = orig
            run_into(Path(tmp) / "w", loaded, PolicyPair("wcs-workload"), seed, "sim", show_progress=False,
                     log_events=False, report=False)
            same = (Path(tmp) / "d" / "jobs.csv").read_bytes() == (Path(tmp) / "w" / "jobs.csv").read_bytes()
        print(f"{seed:<5} {counts['calls']:<6} {counts['two_or_more_waiting']:<10} {counts['orders_differ']:<14} "
              f"{counts['decisions_differ']:<17} {'identical' if same else 'differ'}", flush=True)
    return 0
