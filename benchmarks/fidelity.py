"""Fidelity of the emulated cluster: measured emulated iteration time vs the analytic model.

For every model preset and placement, one job runs on a fresh EmuCluster
(executors of ``raytestbed/emu/executors``) and its steady-state iteration time
is compared with the prediction from the shipped profile and the configured
bandwidths. Steady state: the mean emulated time per iteration over the measured
iterations, after S + 1 warm-up iterations (the pipeline fills) and before S
cool-down ones (it drains); the mean, not the median, because a pipeline's
iteration times may alternate (e.g. 8.07 and 9.64 ms) and its rate is their mean.
Predictions:

* pipeline jobs: A-SRPT eq. (7) (``core.timing.asrpt_iteration_time``);
* ring-all-reduce jobs: SJF-BCO eq. (8) without contention (p_j = 0, gamma = 0,
  C = inf: ``core.timing.sjfbco_iteration_time``).

Placements: all on one server; stages split over 2 and 4 servers (one GPU
each); stage replicas across servers (2 stages x 2 replicas on 4 servers); RAR
with 2 workers on one server, on 2 servers, and 4 workers on 2 servers (2 + 2).

Bandwidths are set per preset so that communication matters: pipeline jobs get
B_inter = 4 A / C (A = activation bytes at the 2-stage cut, C = fwd+bwd of the
whole model), so the 2-server split spends about as long communicating as
computing; RAR jobs get B_inter = 2 h / C (h = parameter bytes). B_intra =
20 B_inter.

Compute modes (the emulator runs on its virtual clock, fast-forward off so that every
iteration runs):

* ``replay``: workers charge the profiled times;
* ``real``: workers run the layers and charge the stage's profiled time times their recent / typical
  thread CPU time, the same profile the model uses (docs/emulator.md, "Real compute"); the residual is what real execution adds
  (CPU-time variance between passes). Each replica computes its share of the profiled mini-batch, so
  the real tensors are the model's per-replica bytes (docs/models.md, "Batch in a distributed job"),
  except where a stage has more replicas, or replica pairs, than the batch has samples (gpt-tiny's
  batch of 2: 4 samples on the 4 RAR workers, which moves no activations, and on the 2 x 2 pipeline,
  whose activations are then 2x the model's): there the prediction is fed the activation bytes the
  plan's batch moves (the row's ``activation_multiple``).

Usage (``raytestbed bench fidelity [options]``, or the entry point ``scripts/bench_fidelity.py``)::

    python scripts/bench_fidelity.py                      # all presets, both modes
    python scripts/bench_fidelity.py --presets mlp-tiny --modes replay --iterations 6
    raytestbed bench fidelity --presets mlp-tiny --modes replay --iterations 6
    # on a GPU host: charge the CUDA time measured, predict from GPU profiles
    raytestbed bench fidelity --modes real --device cuda --compute-factor 1 --profiles DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import warnings
from pathlib import Path

from raytestbed.core.cluster import Cluster
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles, model_profiles
from raytestbed.core.timing import asrpt_iteration_time, sjfbco_iteration_time
from raytestbed.execution.plan import plan_job
from raytestbed.traces.jobs import build_job

PRESETS = ["mlp-tiny", "gpt-tiny", "resnet-small", "vgg19-cifar"]

#: name, pattern, servers, GPUs per server, GPUs of the job, stages, placement (stage_gpus)
SCENARIOS = [
    ("pipe 2st, 1 server", "pipeline", 1, 2, 2, 2, ((0,), (1,))),
    ("pipe 2st, 2 servers", "pipeline", 2, 1, 2, 2, ((0,), (1,))),
    ("pipe 4st, 4 servers", "pipeline", 4, 1, 4, 4, ((0,), (1,), (2,), (3,))),
    ("pipe 2st x2 rep, 4 servers", "pipeline", 4, 1, 4, 2, ((0, 1), (2, 3))),
    ("rar 2w, 1 server", "rar", 1, 2, 2, 1, ((0, 1),)),
    ("rar 2w, 2 servers", "rar", 2, 1, 2, 1, ((0, 1),)),
    ("rar 4w, 2 servers (2+2)", "rar", 2, 2, 4, 1, ((0, 1, 2, 3),)),
]


def bandwidths(profile, pattern: str) -> tuple[float, float]:
    """(B_inter, B_intra) in bytes/s for this preset and pattern (see the module docstring)."""
    c = profile.total_compute_s
    if pattern == "pipeline":
        a = profile.stage_profiles(profile.even_split(2))[0].out_bytes
        b = 4.0 * a / c
    else:
        b = 2.0 * profile.total_param_bytes / c
    return b, 20.0 * b


def predict(job, cluster: Cluster, placement: Placement) -> float:
    """Analytic iteration time: A-SRPT eq. 7 (pipeline) or SJF-BCO eq. 8 without contention (RAR), seconds."""
    if job.comm.value == "pipeline":
        return asrpt_iteration_time(job, placement.counts(cluster), cluster.gpus_per_server, cluster.nic_bps,
                                    cluster.intra_bps)
    return sjfbco_iteration_time(job, len(placement.servers(cluster)), 0, cluster.nic_bps, cluster.intra_bps)


def activation_multiple(job, placement: Placement, cluster: Cluster, prof) -> float:
    """Real compute: the plan's mini-batch over the profiled one (> 1 where replicas outnumber samples)."""
    gb = plan_job(job, placement, cluster, iterations=1, mode="real", profile=prof).workers[0].global_batch
    return gb / prof.batch_size if job.num_stages > 1 and gb > prof.batch_size else 1.0


def with_activations_times(prof, m: float):
    """``prof`` with every layer's output activation bytes times ``m`` (compute and parameters as they are)."""
    return dataclasses.replace(prof, layers=tuple(dataclasses.replace(lay, out_bytes=lay.out_bytes * m)
                                                  for lay in prof.layers))


def run_one(preset: str, scenario, mode: str, iterations: int, profiles: dict | None = None,
            device: str = "cpu", compute_factor: float | None = None) -> dict:
    """One job of ``preset`` on ``scenario``'s placement; ``profiles`` (default: the shipped ones) give
    the job and the prediction; real mode times passes on ``device`` and charges them ``compute_factor``
    emulated seconds per measured second (None: the profile-scaled rule)."""
    from raytestbed.emu.fastforward import FastForward
    from raytestbed.emu.cluster import EmuCluster
    from raytestbed.emu.executors import start_job

    name, pattern, servers, gpus, job_gpus, stages, stage_gpus = scenario
    prof = (profiles or default_profiles())[preset]
    b_inter, b_intra = bandwidths(prof, pattern)
    cluster = Cluster.homogeneous(servers, gpus, b_inter, b_intra, name=f"{servers}x{gpus}")
    job = build_job(1, 0.0, prof, job_gpus, pattern, iterations,
                    num_stages=stages if pattern == "pipeline" else None)
    placement = Placement(stage_gpus)
    m = activation_multiple(job, placement, cluster, prof) if mode == "real" else 1.0
    pred_job = job if m == 1.0 else build_job(1, 0.0, with_activations_times(prof, m), job_gpus, pattern, iterations,
                                              num_stages=stages if pattern == "pipeline" else None)
    pred = predict(pred_job, cluster, placement)
    warmup, cooldown = job.num_stages + 1, job.num_stages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with EmuCluster(cluster, fast_forward=FastForward(enabled=False)) as emu:
            t0 = time.time()
            run = start_job(emu, job, placement, iterations=warmup + iterations + cooldown, mode=mode,
                            compute_factor=compute_factor, profile=prof if mode == "real" else None,
                            device=device)
            ok = run.wait(600)
            wall = time.time() - t0
            rows = run.records()
    if not ok or run.failure:
        raise RuntimeError(f"{preset} / {name} / {mode}: run failed: {run.failure}")
    measured = rows[warmup:warmup + iterations]
    steady = [r["iter_s"] for r in measured]
    meas = statistics.fmean(steady)
    return {
        "preset": preset, "placement": name, "pattern": pattern, "mode": mode, "device": device,
        "compute_factor": compute_factor,
        "b_inter_MBps": b_inter / 1e6,
        "activation_multiple": m,
        "predicted_ms": pred * 1e3, "measured_ms": meas * 1e3, "error": meas / pred - 1.0,
        "compute_ms": statistics.fmean(r["compute_s"] for r in measured) * 1e3,
        "comm_ms": statistics.fmean(r["comm_s"] for r in measured) * 1e3,
        "iterations": len(steady), "wall_s": wall,
    }


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--modes", default="replay,real")
    ap.add_argument("--scenarios", default="", help="comma-separated indices into the scenario list (default all)")
    ap.add_argument("--iterations", type=int, default=8, help="measured iterations between the warm-up and the cool-down")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu",
                    help="real mode: time passes as thread CPU time (cpu) or CUDA event time (cuda)")
    ap.add_argument("--compute-factor", type=float, default=None,
                    help="real mode: emulated seconds per measured second (e.g. 1 with --device cuda and GPU "
                         "profiles: the emulator charges the GPU time it measures); default: the profile-scaled rule")
    ap.add_argument("--profiles", type=Path, default=None,
                    help="a folder of profiles (raytestbed profile --out) for the jobs and the predictions "
                         "(default: the shipped ones)")
    args = ap.parse_args(argv)
    profiles = model_profiles(args.profiles)

    from raytestbed.emu.raysession import RaySession

    session = RaySession.open(resources={"emu_gpu": 8.0})
    scen = [SCENARIOS[int(i)] for i in args.scenarios.split(",")] if args.scenarios else SCENARIOS
    rows = []
    try:
        for mode in args.modes.split(","):
            for preset in args.presets.split(","):
                for sc in scen:
                    r = run_one(preset, sc, mode, args.iterations, profiles, args.device, args.compute_factor)
                    rows.append(r)
                    print(f"{mode:6s} {preset:13s} {sc[0]:28s} pred {r['predicted_ms']:9.2f} ms  "
                          f"meas {r['measured_ms']:9.2f} ms  err {100 * r['error']:+6.1f}%  "
                          f"(compute {r['compute_ms']:.2f}, comm {r['comm_ms']:.2f} ms; wall {r['wall_s']:.1f} s)",
                          flush=True)
    finally:
        session.close()
    print()
    print("| mode | preset | placement | B_inter (MB/s) | predicted (ms) | measured (ms) | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['preset']} | {r['placement']} | {r['b_inter_MBps']:.1f} | "
              f"{r['predicted_ms']:.2f} | {r['measured_ms']:.2f} | {100 * r['error']:+.1f}% |")
    print()
    for mode in args.modes.split(","):
        errs = [abs(r["error"]) for r in rows if r["mode"] == mode]
        print(f"{mode}: median |error| {100 * statistics.median(errs):.1f}%, "
              f"p90 |error| {100 * quantile(errs, 0.9):.1f}% over {len(errs)} runs")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0
