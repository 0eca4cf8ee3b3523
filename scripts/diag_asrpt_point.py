"""One point of the A-SRPT simulation study with chosen policies and A-SRPT variants (diagnostic).

Uses ``scripts/reproduce_asrpt.py``'s job-set construction (``make_jobset``: ``--n`` consecutive
jobs at a seeded random start, the ``--history`` jobs before them train the predictors) and its
``simulate``. A variant is ``policy[:param=value;...]``, e.g. ``asrpt:tau=0.0;delay_mode=deferred``.

    .venv/bin/python scripts/diag_asrpt_point.py --servers 250 --n 7500 --history 5000 \
        --variants asrpt,asrpt-perfect,spjf,spwf,wcs-duration,wcs-workload,wcs-subtime
"""
import sys, time, argparse
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reproduce_asrpt as R
from raytestbed.config import load_cluster
from raytestbed.config import CLUSTER_CONFIG_DIR
import numpy as np
ap = argparse.ArgumentParser()
ap.add_argument('--trace', default='aaic'); ap.add_argument('--n', type=int, default=1500)
ap.add_argument('--servers', type=int, default=5); ap.add_argument('--history', type=int, default=500)
ap.add_argument('--load', type=float, default=1.0); ap.add_argument('--single', type=float, default=None)
ap.add_argument('--seed', type=int, default=1)
ap.add_argument('--variants', default='asrpt,asrpt-perfect,spjf,spwf,wcs-duration,wcs-workload,wcs-subtime')
a = ap.parse_args()
rows = R.read_trace(a.trace, a.seed, a.servers * 8)  # google: GPU counts drawn with the seed, fitting the cluster
cc = load_cluster(CLUSTER_CONFIG_DIR / 'asrpt_sim_250x8.yaml')
grp = cc.servers[0].model_copy(update={'count': a.servers})
cc = cc.model_copy(update={'servers': [grp]})
cl = cc.build()
scale = R.trace_busy_gpus(rows) / (cl.total_gpus * a.load)
js = R.make_jobset(rows, a.n, a.history, a.seed, cl, scale, a.single)
print(f'{a.trace}: {len(rows)} rows; set start {js.start}; load {js.offered_load:.2f}; history {len(js.history)}', flush=True)
hg = {g for g, _, _ in js.history}
print('unseen share', np.mean([j.group not in hg for j in js.jobs]), 'gpus>1 share', np.mean([j.gpus > 1 for j in js.jobs]), 'max gpus', max(j.gpus for j in js.jobs))
for v in a.variants.split(','):
    name, _, extra = v.partition(':')
    params = R.policy_params(name, None, js.history, max(50, a.n // 10))
    for kv in filter(None, extra.split(';')):
        k, val = kv.split('=')
        params[k] = type(params.get(k, 1.0))(val) if k not in ('delay_mode', 'predictor') else val
    r = R.simulate(cl, js.jobs, name, a.seed, params)
    print(f"{v:<34} total JCT {r['total_jct_s']:.4e}  queue {r['avg_queue_s']:.3g}  makespan {r['makespan_s']:.4g}  wall {r['wall_s']:.0f}s", flush=True)
