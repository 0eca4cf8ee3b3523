"""Per-job and per-slot comparison of GADGET and a baseline on one Fig. 4 instance (gadget.md §6).

Runs the policies of ``--variants`` (names of ``reproduce_gadget.VARIANTS``) on the same
``gadget`` workload (``--jobs`` jobs over ``--slots`` slots of 60 s, seed ``--seed``,
arrivals ``--arrivals``: poisson or a trace's pattern) and
prints, per policy:

* total utility sum_i mu_i(progress at T) and how it splits over jobs;
* GPU-slots: used (sum over slots of allocated workers) vs capacity, idle GPU-slots in
  slots where some active job still had budget (work conservation);
* worker-slots spent before a job reached lambda3 (``pre``), after it (``post``: at most
  lambda1 (1 - s) utility left) and on jobs that never reached lambda3 by T (``wasted``);
* preemptions (a job that ran in slot t-1 but not in t while still active) and resizes;
* jobs that reached lambda3 under one policy and not the other (with their parameters).

Units: progress in iterations (zeta_i per worker-slot), capacity in GPU-slots (one GPU for one
slot). Writes ``--out``/per_job.csv (one row per job and policy) and per_slot.csv.

    PYTHONPATH=. nice -n 19 python scripts/diagnose_gadget.py --jobs 4000 --seed 2 --out results/gadget_diag
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reproduce_gadget  # noqa: E402
from reproduce_gadget import ROOT, run_policy, workload  # noqa: E402

from raytestbed.config import load_cluster  # noqa: E402
from raytestbed.placement.utility import job_utility  # noqa: E402


def per_job(jobs, pol, slots: int) -> pd.DataFrame:
    """Worker-slots per job split at the slot where progress first reaches lambda3 (progress capped at F_i)."""
    by_slot: dict[int, dict[int, int]] = defaultdict(dict)
    for s, _t, jid, w in pol.allocations:
        if s < slots:
            by_slot[jid][s] = w
    rows = []
    for j in jobs:
        u = job_utility(j)
        x, pre, post, first, last, runs, preempt = 0.0, 0, 0, -1, -1, 0, 0
        over, prev = 0, -2
        for s in sorted(by_slot[j.job_id]):
            w = by_slot[j.job_id][s]
            if x < u.lambda3:
                pre += w
                # workers of the crossing slot beyond the fewest that reach lambda3 + 5 / lambda2 (99 % of lambda1)
                need = max(1, int(np.ceil((u.lambda3 + 5.0 / u.lambda2 - x) / u.zeta)))
                if x + u.zeta * w >= u.lambda3:
                    over += max(0, w - need)
            else:
                post += w
            x = min(u.budget, x + u.zeta * w)
            first = s if first < 0 else first
            if s != prev + 1:
                runs += 1
            prev, last = s, s
        preempt = max(0, runs - 1)
        rows.append(dict(job=j.job_id, arrival_slot=int(j.arrival_s // 60), zeta=u.zeta, F=u.budget,
                         lambda1=u.lambda1, lambda2=u.lambda2, lambda3=u.lambda3, N=j.extra["N"],
                         fixed=j.extra["fixed_workers"], progress=x, utility=float(u.mu(x)),
                         need_slots=u.lambda3 / u.zeta, budget_slots=u.budget / u.zeta,
                         crossed=x >= u.lambda3, pre=pre, post=post, overshoot=over, first_slot=first, last_slot=last,
                         run_spans=runs, preemptions=preempt))
    return pd.DataFrame(rows)


def by_category(jobs, pol, slots: int) -> pd.DataFrame:
    """Worker-slots and utility gained per allocation category.

    An allocation (job, slot, workers) is ``visible`` when the job's largest pi_{i,kappa}
    (kappa <= q_i, as GADGET computes it) exceeds 1e-6 at that slot — the jobs GADGET hands to
    LP-RS-MDE — else ``tiny`` (GADGET's leftover fill by exact log pi). State: ``below`` (progress
    stays below lambda3), ``crosses`` (reaches lambda3 in this slot), ``above`` (already past it).
    Utility gained = mu_i(after) - mu_i(before) (true sigmoid, progress capped at F_i).
    """
    util = {j.job_id: job_utility(j) for j in jobs}
    nmax = {j.job_id: int(j.extra["N"]) for j in jobs}
    z: dict[int, float] = defaultdict(float)
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for s, _t, jid, w in sorted(pol.allocations):
        if s >= slots:
            continue
        u = util[jid]
        x = min(u.budget, u.zeta * z[jid])
        q = min(nmax[jid], max(1, int(np.floor(u.budget / u.zeta - z[jid] + 1e-9))))
        stage = "visible" if float(u.mu(min(x + u.zeta * q, u.budget)) - u.mu(x)) > 1e-6 else "tiny"
        x1 = min(u.budget, x + u.zeta * w)
        state = "above" if x >= u.lambda3 else ("crosses" if x1 >= u.lambda3 else "below")
        a = acc[(stage, state)]
        a[0] += 1
        a[1] += w
        a[2] += float(u.mu(x1) - u.mu(x))
        z[jid] += w
    return pd.DataFrame([dict(pi=k[0], state=k[1], allocations=v[0], worker_slots=v[1], utility_gained=v[2])
                         for k, v in sorted(acc.items())])


def per_slot(jobs, pol, slots: int, total_gpus: int) -> pd.DataFrame:
    """GPUs allocated and idle per slot (GPU counts), with the policy's active / embedded job counts."""
    used = np.zeros(slots)
    for s, _t, _jid, w in pol.allocations:
        if s < slots:
            used[s] += w
    rows = [dict(slot=s, used=int(used[s]), idle=int(total_gpus - used[s]),
                 active=pol.slot_log[s].get("active", np.nan) if s < len(pol.slot_log) else np.nan,
                 embedded=pol.slot_log[s].get("embedded", np.nan) if s < len(pol.slot_log) else np.nan)
            for s in range(slots)]
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--slots", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--variants", default="gadget,las")
    ap.add_argument("--out", default="results/gadget_diag")
    ap.add_argument("--arrivals", default="poisson", choices=list(reproduce_gadget.ARRIVAL_KINDS),
                    help="arrival pattern of the workload (as reproduce_gadget.py --arrivals)")
    a = ap.parse_args()
    reproduce_gadget.ARRIVALS = a.arrivals
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(ROOT / "cluster_configs" / "gadget_fattree_50.yaml").build()
    jobs = workload(cluster, a.jobs, a.slots, a.seed)
    G = int(cluster.total_gpus)
    pj, ps, pc = [], [], []
    for v in a.variants.split(","):
        util, done, pol, wall = run_policy(cluster, jobs, v, a.slots, a.seed)
        d = per_job(jobs, pol, a.slots).assign(policy=v)
        s = per_slot(jobs, pol, a.slots, G).assign(policy=v)
        c = by_category(jobs, pol, a.slots).assign(policy=v)
        pj.append(d)
        ps.append(s)
        pc.append(c)
        never = d[~d.crossed]
        print(f"== {v}: U={util:.1f} finished={done} wall={wall:.0f}s", flush=True)
        print(f"   GPU-slots used {s.used.sum()} of {G * a.slots} ({s.used.sum() / (G * a.slots):.3f}); "
              f"mean idle/slot {s.idle.mean():.1f}")
        print(f"   crossed lambda3: {int(d.crossed.sum())} jobs, utility from them {d[d.crossed].utility.sum():.0f}; "
              f"not crossed: {len(never)} (served {int((never.pre > 0).sum())} of them)")
        cr = d[d.crossed]
        print(f"   worker-slots pre-lambda3 on crossed {int(cr.pre.sum())} ({cr.pre.mean():.2f} per crossed job), "
              f"post-lambda3 {int(d.post.sum())}, on never-crossed (wasted) {int(never.pre.sum())}")
        print(f"   of the pre-lambda3 worker-slots, {int(d.overshoot.sum())} are workers of the crossing slot beyond "
              f"the fewest that reach lambda3 + 5/lambda2")
        print(f"   preemptions {int(d.preemptions.sum())}, jobs ever served {int((d.pre + d.post > 0).sum())}")
        multi = d[d.lambda3 > d.zeta * d.N]  # cannot reach lambda3 within one slot from zero progress
        for lo, hi in ((0.0, 0.5), (0.5, 1.0)):
            m = multi[(multi.lambda2 > lo) & (multi.lambda2 <= hi)]
            print(f"   jobs with lambda3 > zeta N (need > 1 slot) and lambda2 in ({lo}, {hi}]: {len(m)}, "
                  f"reached lambda3 {int(m.crossed.sum())}, worker-slots {int((m.pre + m.post).sum())}")
        log = [e for e in pol.slot_log[: a.slots] if "candidates" in e]
        if log:  # GADGET's solver: visible jobs (pi > pi_tol) left out, repairs / greedy fallbacks, wall time
            left = sum(e["candidates"] - e["embedded_by_solver"] for e in log)
            fb = [e["fallback"] for e in log]
            print(f"   solver: {sum(e['candidates'] for e in log)} candidate job-slots, {left} left out; fallbacks "
                  f"repair {fb.count('repair')}, greedy {fb.count('greedy')}; "
                  f"max wall {max(e['wall_s'] for e in log):.2f} s")
        for r in c.itertuples():
            print(f"   pi {r.pi:7} {r.state:7}: {r.allocations:6} allocations, {r.worker_slots:6} worker-slots, "
                  f"utility gained {r.utility_gained:9.1f}")
    pj_df = pd.concat(pj)
    pj_df.to_csv(out / "per_job.csv", index=False)
    names = a.variants.split(",")
    for other in names[1:]:
        g = pj_df[pj_df.policy == names[0]].set_index("job")
        b = pj_df[pj_df.policy == other].set_index("job")
        for who, mine, theirs in ((names[0], g, b), (other, b, g)):
            sel = mine.crossed & ~theirs.crossed
            m, t = mine[sel], theirs[sel]
            print(f"   reach lambda3 only under {who}: {int(sel.sum())} jobs, utility {m.utility.sum():.0f}; mean "
                  f"lambda1 {m.lambda1.mean():.1f}, lambda2 {m.lambda2.mean():.2f}, "
                  f"lambda3/zeta {m.need_slots.mean():.1f} worker-slots; {who} gave them "
                  f"{int((m.pre + m.post).sum())} worker-slots, the other {int((t.pre + t.post).sum())}")
    pd.concat(ps).to_csv(out / "per_slot.csv", index=False)
    pd.concat(pc).to_csv(out / "by_category.csv", index=False)


if __name__ == "__main__":
    main()
