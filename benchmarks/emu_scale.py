"""The emulator at scale on this host: 64 emulated GPUs in replay, 16 computing real PyTorch at once.

1. ``workloads/trials/parity_realistic.yaml`` (8 servers x 8 GPUs, 40 jobs) under FIFO on the
   emulator, replay compute: wall time, emulated seconds per wall second, iterations run and
   fast-forwarded.
2. ``workloads/trials/scale_real16.yaml`` (16 one-GPU jobs, real compute) twice: as written (all 16
   arrive within 2 ms and compute at once on the host's cores) and with the arrivals 1000 x further
   apart (one job at a time). Every job's mean measured iteration time and compute time, side by
   side, and the largest relative difference: compute is charged as each worker's own CPU seconds,
   so sharing the cores must not change it. Fast-forward is off for these two runs unless
   ``--real-fast-forward``: with it on, each job computes only its first ~13-20 iterations (the
   rest are skipped), so the 16 jobs hardly compute at the same time and each mean is over a
   dozen noisy passes; with it off every iteration runs (60 to 1,500 per job).

On a GPU host, ``--device cuda --compute-factor 1`` runs the real-compute trial with every pass timed
by CUDA events and charged as measured (emulated seconds = GPU seconds), and ``--profiles DIR`` (a
folder that ``raytestbed profile --device cuda --out`` filled) adds each job's profiled iteration
(forward + backward of the whole model; a one-GPU job moves no bytes) beside what the emulator
measured. ``--together-only`` skips the one-at-a-time run.

    raytestbed bench emu-scale [--out DIR] [--skip-replay] [--skip-real] [--real-fast-forward]
                               [--device cpu|cuda|auto] [--compute-factor F] [--profiles DIR] [--together-only]
    python scripts/bench_emu_scale.py [same options]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from raytestbed.core.profile import model_profiles
from raytestbed.resources import package_dir


def run(trial: Path, out: Path, policy: str = "fifo") -> dict:
    from raytestbed.cli import main as cli

    rc = cli(["run", str(trial), "--backend", "emu", "--policy", policy, "--out", str(out), "--force", "--quiet"])
    if rc != 0:
        raise SystemExit(f"bench_emu_scale: {trial} failed (exit {rc})")
    return json.loads((out / "summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--real-fast-forward", action="store_true",
                    help="fast-forward steady iterations in the real-compute runs too (default: every iteration runs)")
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu",
                    help="real compute: thread CPU time (cpu) or CUDA event time (cuda) per pass")
    ap.add_argument("--compute-factor", type=float, default=None,
                    help="real compute: emulated seconds per measured second (default: the profile-scaled rule)")
    ap.add_argument("--profiles", type=Path, default=None,
                    help="profiles to set each job's measured iteration beside (default: the shipped ones)")
    ap.add_argument("--together-only", action="store_true", help="skip the one-job-at-a-time real run")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_emu_scale_"))
    out.mkdir(parents=True, exist_ok=True)
    trials = package_dir("trials")
    if not args.skip_replay:
        s = run(trials / "parity_realistic.yaml", out / "replay64")
        e = s["emulation"]
        print(f"\n64 emulated GPUs, replay: {s['jobs']} jobs, {s['finished']} finished, emulated {e['emulated_s']:.0f} s "
              f"in {e['wall_s']:.0f} s wall ({e['emulated_s_per_wall_s']:.3g} emulated s per wall s); "
              f"iterations run {e['iterations_run']}, fast-forwarded {e['iterations_fast_forwarded']}; "
              f"peak busy GPUs {e['peak_busy_gpus']}")
    if not args.skip_real:
        doc = yaml.safe_load((trials / "scale_real16.yaml").read_text())
        doc["workload"]["path"] = str((trials / doc["workload"]["path"]).resolve())
        doc["emu"] = {**doc.get("emu", {}), "fast_forward": bool(args.real_fast_forward), "compute_device": args.device}
        if args.compute_factor is not None:
            doc["emu"]["compute_factor"] = args.compute_factor
        spread = dict(doc, workload={**doc["workload"], "arrival_scale": doc["workload"]["arrival_scale"] * 1e6})
        (out / "together.yaml").write_text(yaml.safe_dump(doc))
        (out / "alone.yaml").write_text(yaml.safe_dump(spread))
        st = run(out / "together.yaml", out / "together")
        jt = pd.read_csv(out / "together" / "jobs.csv").set_index("job_id")
        profiles = model_profiles(args.profiles)
        print(f"\n16 GPUs of real compute ({args.device}; compute factor "
              f"{args.compute_factor if args.compute_factor is not None else 'profile-scaled'}): peak busy GPUs "
              f"{st['emulation']['peak_busy_gpus']}, wall {st['emulation']['wall_s']:.0f} s (together)")
        by_profile = []
        for j in jt.index:
            p = profiles[jt.loc[j, "model"]].total_compute_s
            d = jt.loc[j, "measured_iter_mean_s"] / p - 1.0
            by_profile.append(abs(d))
            print(f"| {j} | {jt.loc[j, 'model']} | together {1e3 * jt.loc[j, 'measured_iter_mean_s']:.3f} ms | "
                  f"profile {1e3 * p:.3f} ms | {100 * d:+.2f} % |")
        print(f"\nagainst the profile: largest |difference| {100 * max(by_profile):.2f} %, "
              f"median {100 * sorted(by_profile)[len(by_profile) // 2]:.2f} %")
        if not args.together_only:
            sa = run(out / "alone.yaml", out / "alone")
            ja = pd.read_csv(out / "alone" / "jobs.csv").set_index("job_id")
            print(f"\npeak busy GPUs {st['emulation']['peak_busy_gpus']} (together) vs "
                  f"{sa['emulation']['peak_busy_gpus']} (alone); wall {st['emulation']['wall_s']:.0f} s vs "
                  f"{sa['emulation']['wall_s']:.0f} s")
            print("| job | model | iteration (ms), together | alone | difference | compute (ms), together | alone |")
            print("|---|---|---|---|---|---|---|")
            diffs = []
            for j in jt.index:
                a, b = jt.loc[j, "measured_iter_mean_s"], ja.loc[j, "measured_iter_mean_s"]
                d = a / b - 1.0
                diffs.append(abs(d))
                print(f"| {j} | {jt.loc[j, 'model']} | {1e3 * a:.3f} | {1e3 * b:.3f} | {100 * d:+.2f} % | "
                      f"{1e3 * jt.loc[j, 'measured_compute_mean_s']:.3f} | "
                      f"{1e3 * ja.loc[j, 'measured_compute_mean_s']:.3f} |")
            print(f"\nlargest |difference| {100 * max(diffs):.2f} %, median {100 * sorted(diffs)[len(diffs) // 2]:.2f} %")
    print(f"results: {out}")
    return 0
