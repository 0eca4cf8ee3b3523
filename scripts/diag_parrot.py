"""Instrumented Parrot / Aalo / LCCF runs on a reduced ms60 instance (docs/reproductions.md, "Parrot").

At every rate decision records: active jobs, fabric utilisation (sum of link loads over the
capacity of every NIC link, and over the links that carry an active flow), the share of the
fabric rate given to the inferred job (Parrot), and whether the LPCAS-inferred job is the active job
with the least expected remaining bytes (also for least-bytes-sent, Aalo's order) (2 x iterations x workers x PSs x L_m / 2 minus bytes sent).

    PYTHONPATH=. python scripts/diag_parrot.py --limit 20 --iteration-scale 0.001
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytestbed.network.coflow_rates import link_loads  # noqa: E402
from raytestbed.schedulers.base import make_policy  # noqa: E402
from raytestbed.schedulers.parrot import lpcas_key  # noqa: E402
from raytestbed.sim.engine import Simulator  # noqa: E402
from raytestbed.traces.registry import load_workload  # noqa: E402
from scripts.reproduce_parrot import cluster  # noqa: E402


def run(scheme: str, args, params: dict) -> dict:
    cl = cluster(args.gbps, args.servers)
    wl = {"gpu_scale": 2, "iteration_scale": args.iteration_scale, "arrival_scale": args.iteration_scale,
          "max_coflow_mb": 1000, "limit": args.limit}
    jobs = load_workload("ms60", wl, cl, args.seed, ROOT)
    total_bytes = {j.job_id: 2 * j.iterations * j.stages[0].replicas * j.num_ps * j.traffic.max_flow_bytes / 2
                   for j in jobs}
    fifo = make_policy("fifo", "placement", args.seed, spread="random")
    net = make_policy(scheme, "network", args.seed, **params)
    log = []
    orig = net.compute_rates

    def wrapped(flows, links, view):
        rates = orig(flows, links, view)
        load = link_loads(flows, links, rates)
        nic = 2 * links.n_servers
        used = np.zeros(links.capacity.size, dtype=bool)
        used[flows.inc_link] = True
        used_nic = used[:nic]
        rec = {"t": view.now, "jobs": len(set(flows.coflow_job)),
               "util_all": load[:nic].sum() / links.capacity[:nic].sum(),
               "util_touched": load[:nic][used_nic].sum() / links.capacity[:nic][used_nic].sum(),
               "frac_sat": float(np.mean(load[:nic][used_nic] >= 0.999 * links.capacity[:nic][used_nic]))}
        inf = getattr(net, "last_inferred", None)
        if inf is not None and rec["jobs"] > 1:
            net_f = flows.src != flows.dst
            jf = np.array([flows.coflow_job[c] for c in flows.cf])
            rec["inferred_share"] = rates[net_f & (jf == inf)].sum() / rates[net_f].sum()
        act = sorted(set(flows.coflow_job))
        if len(act) > 1:
            run_ = view.running
            rem = {j: total_bytes[j] - run_[j].bytes_sent for j in act}
            srpt = min(rem, key=rem.get)
            lpcas = min(act, key=lambda j: lpcas_key(run_[j].bytes_sent, run_[j].coflows_done, run_[j].job.arrival_s, j))
            las = min(act, key=lambda j: (run_[j].bytes_sent, run_[j].job.arrival_s, j))
            rec["lpcas_is_srpt"] = lpcas == srpt
            rec["least_sent_is_srpt"] = las == srpt
        log.append(rec)
        return rates

    net.compute_rates = wrapped
    res = Simulator(cl, jobs, fifo, net, mode="flow").run()
    jct = [r.finish_s - r.job.arrival_s for r in res.records]
    out = {"scheme": scheme + (f" {params}" if params else ""), "total_jct_s": sum(jct),
           "lb_s": sum(r.lower_bound_s for r in res.records), "events": len(log)}
    for k in ("jobs", "util_all", "util_touched", "frac_sat", "inferred_share",
              "lpcas_is_srpt", "least_sent_is_srpt"):
        v = [r[k] for r in log if k in r]
        if v:
            out[k] = float(np.mean(v))
    return out


def parse_case(text: str) -> tuple[str, dict]:
    """``scheme:key=value,...`` -> (scheme, params); true/false and numbers are converted."""
    scheme, _, rest = text.partition(":")
    params: dict = {}
    for item in filter(None, rest.split(",")):
        k, _, v = item.partition("=")
        low = v.lower()
        if low in ("true", "false"):
            params[k] = low == "true"
        else:
            try:
                params[k] = float(v)
            except ValueError:
                params[k] = v
    return scheme, params


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--iteration-scale", type=float, default=0.001)
    ap.add_argument("--gbps", type=float, default=10)
    ap.add_argument("--servers", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", default="", help="comma list of case indices (default: all)")
    ap.add_argument("--case", action="append", default=[],
                    help="extra case SCHEME[:key=value,...], e.g. parrot:fill_residual=false,fill_order=lpcas "
                         "(repeatable; replaces the default list)")
    args = ap.parse_args()
    # explicit fill parameters: the cases of the docs/reproductions.md table, whatever the policy defaults
    cases = [("parrot", {"fill_residual": False, "fill_order": "none"}),
             ("parrot", {"fill_residual": True, "fill_order": "none"}),
             ("parrot", {"fill_residual": True, "fill_order": "lpcas"}),
             ("aalo", {"fill_residual": False}), ("aalo", {"fill_residual": True}),
             ("lccf", {"fill_residual": True})]
    if args.cases:
        cases = [cases[int(i)] for i in args.cases.split(",")]
    if args.case:
        cases = [parse_case(c) for c in args.case]
    for scheme, params in cases:
        r = run(scheme, args, params)
        print("  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
