"""``raytestbed bench profile-load``: does host load bend a profile?

Profiles every model preset (or ``--models``) with the project's profiler (thread CPU time, one
torch thread, median of ``--repeats`` after warm-up) on the host as it is and beside ``--load``
CPU-bound processes (busy loops), alternating the two conditions ``--rounds`` times so that a
change of the rest of the host's load falls on both. For each preset it prints, side by side, the
iteration time of both conditions and the per-layer medians' ratio loaded / quiet - 1 (each
condition's per-layer time = the median over its rounds), the largest over the layers, a control
with no load between (the first quiet round's layers against the second's: how far the host drifts
on its own), the host's
1-minute load per core during each condition, and CPU and wall seconds of the whole run.

    raytestbed bench profile-load [--models mlp-tiny,gpt-tiny] [--load 2] [--rounds 2] [--repeats 21]
                                  [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.emu import busy_processes

DEFAULT_MODELS = ("mlp-tiny", "gpt-tiny", "resnet-small", "vgg19-cifar", "gpt-small")


def _profile(name: str, repeats: int, warmup: int):
    from raytestbed.models import build_model
    from raytestbed.profile.profiler import profile_model

    return profile_model(build_model(name, seed=0), warmup=warmup, repeats=repeats)


def compare_model(name: str, load: int, rounds: int, repeats: int, warmup: int) -> dict:
    """Profiles of ``name`` quiet and beside ``load`` busy processes, alternated ``rounds`` times."""
    runs: dict[str, list] = {"quiet": [], "loaded": []}
    for r in range(rounds):
        order = ("quiet", "loaded") if r % 2 == 0 else ("loaded", "quiet")
        for cond in order:
            if cond == "quiet":
                runs[cond].append(_profile(name, repeats, warmup))
            else:
                with busy_processes(load):
                    time.sleep(0.5)  # let the busy processes start
                    runs[cond].append(_profile(name, repeats, warmup))

    def per_layer(profs: list) -> list[float]:
        return [statistics.median(p.layers[i].fwd_s + p.layers[i].bwd_s for p in profs)
                for i in range(profs[0].num_layers)]

    def largest(ratios: list[float]) -> int:
        return max(range(len(ratios)), key=lambda i: abs(ratios[i]))

    q, lo = per_layer(runs["quiet"]), per_layer(runs["loaded"])
    ratios = [b / a - 1.0 for a, b in zip(q, lo)]
    worst = largest(ratios)
    # the control: the host's own drift, the first quiet round against the second (no load between)
    if rounds >= 2:
        q0, q1 = per_layer(runs["quiet"][:1]), per_layer(runs["quiet"][1:2])
        control = [b / a - 1.0 for a, b in zip(q0, q1)]
        drift = {"quiet_vs_quiet_max_layer_diff": control[largest(control)],
                 "quiet_vs_quiet_within_5pct": sum(abs(x) <= 0.05 for x in control)}
    else:
        drift = {"quiet_vs_quiet_max_layer_diff": None, "quiet_vs_quiet_within_5pct": None}
    names = [lay.name for lay in runs["quiet"][0].layers]

    def loadavg(cond: str) -> float:
        return max(x for p in runs[cond] for x in p.measurement["load_per_core"] if x is not None)

    def spread(cond: str) -> float:
        return max(p.measurement["spread"] for p in runs[cond])

    return {
        "model": name, "layers": len(q), "iter_quiet_ms": sum(q) * 1e3, "iter_loaded_ms": sum(lo) * 1e3,
        "iter_diff": sum(lo) / sum(q) - 1.0, "max_layer_diff": ratios[worst], "worst_layer": names[worst],
        "layers_within_5pct": sum(abs(x) <= 0.05 for x in ratios), "layer_diffs": ratios,
        "load_quiet": loadavg("quiet"), "load_loaded": loadavg("loaded"),
        "spread_quiet": spread("quiet"), "spread_loaded": spread("loaded"), **drift,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench profile-load", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated presets")
    ap.add_argument("--load", type=int, default=2, help="CPU-bound processes beside the loaded profiles")
    ap.add_argument("--rounds", type=int, default=2, help="quiet/loaded pairs, alternating which goes first")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write the per-layer numbers as JSON here")
    args = ap.parse_args(argv)
    if args.load < 0 or args.rounds < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--load >= 0, --rounds >= 1, --repeats >= 1 and --warmup >= 0")
    from raytestbed.models import PRESETS

    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in PRESETS:
            ap.error(f"--models: unknown preset {m!r} (raytestbed profile --list)")
    c0, w0 = time.process_time(), time.perf_counter()
    rows = []
    for m in models:
        rows.append(compare_model(m, args.load, args.rounds, args.repeats, args.warmup))
        r = rows[-1]
        print(f"{m}: iteration {r['iter_quiet_ms']:.2f} ms quiet, {r['iter_loaded_ms']:.2f} ms +{args.load} busy "
              f"({100 * r['iter_diff']:+.1f} %)", flush=True)
    print(f"\nbench profile-load: thread CPU time, 1 torch thread, median of {args.repeats} after {args.warmup} "
          f"warm-up; {args.rounds} alternating rounds per condition; +{args.load} busy processes "
          f"({time.process_time() - c0:.0f} CPU s, {time.perf_counter() - w0:.0f} wall s)")
    print("| preset | layers | iteration quiet (ms) | +busy (ms) | iteration diff | largest layer diff (layer) "
          "| layers within 5 % | control: quiet round 1 vs 2, largest / within 5 % "
          "| load/core quiet | load/core +busy | spread quiet / +busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        control = ("n/a (one round)" if r["quiet_vs_quiet_max_layer_diff"] is None else
                   f"{100 * r['quiet_vs_quiet_max_layer_diff']:+.1f} % / {r['quiet_vs_quiet_within_5pct']} of "
                   f"{r['layers']}")
        print(f"| {r['model']} | {r['layers']} | {r['iter_quiet_ms']:.2f} | {r['iter_loaded_ms']:.2f} | "
              f"{100 * r['iter_diff']:+.1f} % | {100 * r['max_layer_diff']:+.1f} % ({r['worst_layer']}) | "
              f"{r['layers_within_5pct']} of {r['layers']} | {control} | {r['load_quiet']:.1f} | "
              f"{r['load_loaded']:.1f} | {100 * r['spread_quiet']:.0f} % / {100 * r['spread_loaded']:.0f} % |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
        print(f"results: {args.out}")
    return 0
