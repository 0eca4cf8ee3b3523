"""``raytestbed bench emu``: does host load bend the emulator's results, and how fast does it run?

Runs one emulated trial twice — on the host as it is, then again beside ``--load`` CPU-bound
processes (busy loops, one per process) — and compares the two ``jobs.csv`` files job by job:
first start, finish and JCT (emulated seconds). On the virtual clock replay runs must agree to
the last digit; real compute charges measured CPU seconds, so they agree within its noise. Also
printed, side by side: wall seconds and emulated seconds per wall second of both runs.

    raytestbed bench emu [--trial workloads/trials/demo_emu.yaml] [--policy fifo] [--load 2]
                         [--compute replay|real] [--no-fast-forward] [--repeat N] [--out DIR]

``--repeat N`` runs the pair N times, quiet and loaded interleaved (so a drift of the host falls on
both), and adds the run-to-run spread of real compute: per run the total JCT and the iterations each
job fast-forwarded; over all 2N runs (and per condition) the spread of the total JCT and the largest
per-job JCT spread, (max - min) / mean; and whether every run skipped the same iterations.

``--no-fast-forward`` runs every iteration (a copy of the trial with ``emu.fast_forward: false``):
with real compute, fast-forward extrapolates each job's rate from a few measured iterations, so
two runs that fast-forward at different moments differ by that window's noise as well.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

import pandas as pd

COLUMNS = ("first_start_s", "finish_s", "jct_s")


def _burn() -> None:  # pragma: no cover - runs in a child process until terminated
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` CPU-bound processes (busy loops) while the block runs; killed when it ends."""
    procs = [mp.Process(target=_burn, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.join()


def run_trial(trial: Path, policy: str, out: Path, compute: str | None) -> dict:
    """One emulated run through the CLI's path; returns its summary."""
    from raytestbed.cli import main

    backend = "emu" if compute is None else f"emu:{compute}"
    rc = main(["run", str(trial), "--backend", backend, "--policy", policy, "--out", str(out), "--force", "--quiet"])
    if rc != 0:
        raise SystemExit(f"bench emu: the run into {out} failed (exit {rc})")
    return json.loads((out / "summary.json").read_text())


def without_fast_forward(trial: Path, out: Path) -> Path:
    """A copy of ``trial`` in ``out`` with ``emu.fast_forward: false`` (relative data paths resolved)."""
    return trial_copy(trial, out, {"fast_forward": False}, "no_ff")


def trial_copy(trial: Path, out: Path, emu: dict, suffix: str) -> Path:
    """A copy of ``trial`` in ``out`` (``STEM_SUFFIX.yaml``) with ``emu`` merged into its ``emu:``
    section (relative data and cluster paths resolved)."""
    import yaml

    doc = yaml.safe_load(trial.read_text())
    wl = doc.get("workload") or {}
    if isinstance(wl.get("path"), str) and not Path(wl["path"]).is_absolute():
        wl["path"] = str((trial.parent / wl["path"]).resolve())
    if isinstance(doc.get("cluster"), str) and not Path(doc["cluster"]).is_absolute():
        local = trial.parent / doc["cluster"]
        if local.exists():
            doc["cluster"] = str(local.resolve())
    doc["emu"] = {**(doc.get("emu") or {}), **emu}
    copy = out / f"{trial.stem}_{suffix}.yaml"
    copy.write_text(yaml.safe_dump(doc, sort_keys=False))
    return copy


def compare(a: Path, b: Path) -> dict:
    """Per-job differences of two results folders (emulated seconds)."""
    ja = pd.read_csv(a / "jobs.csv").set_index("job_id")
    jb = pd.read_csv(b / "jobs.csv").set_index("job_id")
    out = {"jobs": len(ja), "identical_rows": int(sum(
        all(repr(ja.loc[j, c]) == repr(jb.loc[j, c]) for c in COLUMNS) for j in ja.index))}
    for c in COLUMNS:
        out[f"max_abs_diff_{c}"] = float((ja[c] - jb[c]).abs().max())
    ta, tb = ja["jct_s"].sum(), jb["jct_s"].sum()
    out["total_jct_quiet_s"], out["total_jct_loaded_s"] = float(ta), float(tb)
    out["total_jct_rel_diff"] = float(tb / ta - 1.0)
    return out


def spread(xs) -> float:
    """(max - min) / mean of a sample (0 for one value)."""
    xs = list(xs)
    return (max(xs) - min(xs)) / (sum(xs) / len(xs)) if xs and sum(xs) else 0.0


def repeat_stats(folders: dict[str, list[Path]]) -> dict:
    """Run-to-run spread of the runs in ``folders`` (condition -> results folders): total JCT and the
    largest per-job JCT spread, per condition and over all runs, and the iterations each job skipped."""
    jobs = {c: [pd.read_csv(f / "jobs.csv").set_index("job_id") for f in fs] for c, fs in folders.items()}

    def stats(tables: list[pd.DataFrame]) -> dict:
        jct = pd.concat([t["jct_s"] for t in tables], axis=1)
        per_job = jct.apply(lambda r: spread(r.to_numpy(float)), axis=1)
        return {"runs": len(tables), "total_jct_s": [float(t["jct_s"].sum()) for t in tables],
                "total_jct_spread": spread(t["jct_s"].sum() for t in tables),
                "max_job_jct_spread": float(per_job.max()), "job_of_max_spread": int(per_job.idxmax())}

    out = {c: stats(ts) for c, ts in jobs.items()}
    everything = [t for ts in jobs.values() for t in ts]
    out["all"] = stats(everything)
    skipped = {c: [tuple(int(x) for x in t.get("skipped_iterations", pd.Series(dtype=float)).fillna(0))
                   for t in ts] for c, ts in jobs.items()}
    out["skipped_iterations"] = skipped
    out["same_iterations_skipped"] = len({s for ss in skipped.values() for s in ss}) == 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raytestbed bench emu", description=__doc__.splitlines()[0])
    ap.add_argument("--trial", type=Path, default=Path("workloads/trials/demo_emu.yaml"))
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--load", type=int, default=2, help="CPU-bound processes beside the second run")
    ap.add_argument("--compute", choices=["replay", "real"], default=None, help="override the trial's emu.compute")
    ap.add_argument("--no-fast-forward", action="store_true", help="run every iteration (emu.fast_forward: false)")
    ap.add_argument("--repeat", type=int, default=1, help="quiet/loaded pairs to run (interleaved); N > 1 "
                    "adds the run-to-run spread")
    ap.add_argument("--out", type=Path, default=None, help="keep the results folders here")
    args = ap.parse_args(argv)
    if args.load < 0:
        ap.error("--load must be >= 0")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    base = args.out or Path(tempfile.mkdtemp(prefix="bench_emu_"))
    base.mkdir(parents=True, exist_ok=True)
    quiet, loaded = base / "quiet", base / "loaded"
    if args.no_fast_forward:
        args.trial = without_fast_forward(args.trial, base)
    t0 = time.perf_counter()
    folders: dict[str, list[Path]] = {"quiet": [], "loaded": []}
    for k in range(args.repeat):
        q, lo = (quiet, loaded) if k == 0 else (base / f"quiet{k + 1}", base / f"loaded{k + 1}")
        sq_k = run_trial(args.trial, args.policy, q, args.compute)
        with busy_processes(args.load):
            sl_k = run_trial(args.trial, args.policy, lo, args.compute)
        folders["quiet"].append(q)
        folders["loaded"].append(lo)
        if k == 0:
            sq, sl = sq_k, sl_k
        if args.repeat > 1:
            print(f"pair {k + 1} of {args.repeat}: total JCT quiet {sq_k['total_jct_s']:.6f} s, "
                  f"+{args.load} busy {sl_k['total_jct_s']:.6f} s", flush=True)
    diff = compare(quiet, loaded)
    eq, el = sq["emulation"], sl["emulation"]
    print(f"\nbench emu: {args.trial} policy {args.policy}, compute {eq['compute']}, "
          f"{args.load} CPU-bound processes beside the second run ({time.perf_counter() - t0:.0f} s)")
    print(f"| run | total JCT (s) | makespan (s) | wall (s) | emulated s / wall s | iterations run | fast-forwarded |")
    print("|---|---|---|---|---|---|---|")
    for name, s, e in (("quiet", sq, eq), (f"+{args.load} busy", sl, el)):
        print(f"| {name} | {s['total_jct_s']:.6f} | {s['makespan_s']:.6f} | {e['wall_s']:.1f} | "
              f"{e['emulated_s_per_wall_s']:.3g} | {e['iterations_run']} | {e['iterations_fast_forwarded']} |")
    print(f"\njobs with identical start, finish and JCT (to the last digit): {diff['identical_rows']} of {diff['jobs']}")
    print("largest per-job difference: " + ", ".join(f"{c} {diff[f'max_abs_diff_{c}']:.3g} s" for c in COLUMNS))
    print(f"total JCT loaded / quiet - 1: {100 * diff['total_jct_rel_diff']:+.3f} %; "
          f"wall loaded / quiet: {el['wall_s'] / eq['wall_s']:.2f}")
    rep = repeat_stats(folders) if args.repeat > 1 else None
    if rep is not None:
        print(f"\nrun-to-run spread over {args.repeat} quiet and {args.repeat} loaded runs, (max - min) / mean:")
        print("| runs | total JCT (s) per run | total JCT spread | largest per-job JCT spread (job) |")
        print("|---|---|---|---|")
        for c, name in (("quiet", "quiet"), ("loaded", f"+{args.load} busy"), ("all", "all")):
            r = rep[c]
            print(f"| {name} | {', '.join(f'{x:.4f}' for x in r['total_jct_s'])} | {100 * r['total_jct_spread']:.2f} % | "
                  f"{100 * r['max_job_jct_spread']:.2f} % (job {r['job_of_max_spread']}) |")
        print("iterations fast-forwarded per job, each run: "
              + "; ".join(f"{c} " + " ".join(str(list(s)) for s in ss) for c, ss in rep["skipped_iterations"].items()))
        print(f"the same iterations fast-forwarded in all {2 * args.repeat} runs: "
              f"{'yes' if rep['same_iterations_skipped'] else 'NO'}")
    (base / "bench_emu.json").write_text(json.dumps({"quiet": eq, "loaded": el, **diff, "repeat": rep},
                                                    indent=1, default=str))
    print(f"results: {base}")
    return 0
