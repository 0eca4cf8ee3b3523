"""``raytestbed bench emu-breakdown``: where an emulated iteration's wall time goes.

Runs one trial's policy on the emulator twice, side by side in one process's run:

1. **In-process** — the same clock service, fabric, scheduler and worker programs, with every
   run's workers as plain objects on one asyncio loop (no Ray; what the emulator's tests use),
   under cProfile timing CPU seconds (``time.process_time``: on a busy host, waiting for a core is
   not counted). Each function's own CPU time (cProfile's ``tottime``) is summed per part of the
   emulator, by the file it is written in:

   * *clock*: the virtual clock and the clock service's loop, runs and fast-forward
     (``emu/clock_service.py``, ``emu/vclock.py``, ``emu/run.py``, ``emu/fastforward.py``,
     ``execution/monitor.py``);
   * *fabric*: the fluid network model and its flow view (``emu/fluid.py``, ``emu/flowview.py``,
     ``network/``);
   * *worker code*: the worker program, its driver and compute strategy (``execution/``
     except the monitor, ``emu/executors/``);
   * *scheduler*: the event core, cluster state and policies (``emu/scheduler.py``, ``core/``,
     ``schedulers/``, ``placement/``, ``predict/``);
   * *event loop*: asyncio itself; *other*: the rest (numpy's Python side, imports, ...).

   A built-in function's time (``len``, ``min``, numpy's C functions) counts in the part of the
   function that called it.

2. **Through Ray** — ``raytestbed run TRIAL --backend emu`` as a user runs it, once per worker layout
   (``--workers``, default both; a copy of the trial with ``emu.workers`` set): ``pool``, the clock
   service in a Ray actor and the workers in the worker pool's host processes, and ``clock``, the
   workers in the clock actor's own process (the replay default). The pool run's wall time less the
   in-process run's (both without cProfile, the in-process one measured again unprofiled) is
   what Ray's calls add: messages between the clock actor and the worker hosts, serialisation,
   and the processes' scheduling. The ratio of the two layouts' emulation wall times is printed.

Both runs must give the same per-job results (replay is deterministic): the benchmark checks the
total JCT and says so. Wall and CPU seconds are printed for every run; for the Ray run, also the CPU
seconds of the processes Ray started (its node, the clock actor, the worker hosts: this process's
reaped descendants, ``RUSAGE_CHILDREN``, start-up included). On a busy host the wall times grow
with the load; the CPU seconds are the comparable figures.

    raytestbed bench emu-breakdown [--trial demo_emu] [--policy fifo] [--workers pool,clock] [--no-ray] [--top 12]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import pstats
import resource
import tempfile
import time
from pathlib import Path

PARTS = (  # (part, path fragments of the files it holds); the first match wins
    ("clock", ("emu/clock_service.py", "emu/vclock.py", "emu/run.py", "emu/fastforward.py",
               "execution/monitor.py", "emu/clock_actor.py")),
    ("fabric", ("emu/fluid.py", "emu/flowview.py", "raytestbed/network/")),
    ("worker code", ("raytestbed/execution/", "emu/executors/")),
    ("scheduler", ("emu/scheduler.py", "raytestbed/core/", "raytestbed/schedulers/", "raytestbed/placement/",
                   "raytestbed/predict/")),
    ("event loop", ("asyncio/",)),
)


def part_of(filename: str) -> str:
    """The emulator part a source file belongs to (see the module docstring)."""
    f = filename.replace("\\", "/")
    for part, frags in PARTS:
        if any(fr in f for fr in frags):
            return part
    return "other"


def in_process(loaded, policy_name: str, seed: int, profile: bool):
    """The trial on the in-process emulator; returns (result dict, wall s, CPU s, pstats.Stats or None)."""
    from raytestbed.emu.clock_actor import run_in_process
    from raytestbed.emu.fastforward import FastForward
    from raytestbed.schedulers.base import make_policy
    from raytestbed.trial import _trial_jobs, trial_speeds

    trial = loaded.trial
    cluster = loaded.cluster_config.build()
    jobs = _trial_jobs(loaded, seed)
    policy = make_policy(policy_name, "placement", seed, [loaded.base_dir], **trial.policy_params.get(policy_name, {}))

    prof = cProfile.Profile(time.process_time) if profile else None  # own times in CPU seconds
    w0, c0 = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    res, _, _, _ = run_in_process(cluster, jobs, [policy], fast_forward=FastForward(**trial.emu.fast_forward.model_dump()),
                                  mode=trial.emu.compute, replay_payload_bytes=trial.emu.replay_payload_bytes,
                                  speeds=trial_speeds(loaded, cluster, jobs), restore_s=trial.timing.restore_s)
    if prof is not None:
        prof.disable()
    return res, time.perf_counter() - w0, time.process_time() - c0, (pstats.Stats(prof) if prof else None)


def parts(stats: pstats.Stats) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Own seconds per part, and the functions by own seconds (largest first)."""
    out: dict[str, float] = {}
    funcs = []
    for (filename, line, name), (_cc, _nc, tt, _ct, callers) in stats.stats.items():
        if filename == "~" and callers:  # a built-in (len, min, numpy's C functions): its callers' part
            for (cfile, _cl, _cn), cstat in callers.items():
                p = part_of(cfile)
                out[p] = out.get(p, 0.0) + cstat[2]
            p = "built-ins"
        else:
            p = part_of(filename)
            out[p] = out.get(p, 0.0) + tt
        funcs.append((tt, f"{p}: {Path(filename).name}:{line} {name}"))
    return out, sorted(funcs, reverse=True)


def _children_cpu() -> float:
    """CPU seconds of this process's ended and reaped descendants (Ray's processes, once Ray stopped)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def through_ray(trial_path: str, policy: str, out: Path) -> tuple[dict, float, float, float]:
    """``raytestbed run`` on the emulator; returns (summary.json, wall s, this process's CPU s, CPU s of
    the processes Ray started and stopped for it)."""
    from raytestbed.cli import main as cli

    w0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    rc = cli(["run", trial_path, "--backend", "emu", "--policy", policy, "--out", str(out), "--force", "--quiet"])
    wall, cpu, kids = time.perf_counter() - w0, time.process_time() - c0, _children_cpu() - k0
    if rc != 0:
        raise SystemExit(f"emu-breakdown: the Ray run failed (exit {rc})")
    return json.loads((out / "summary.json").read_text()), wall, cpu, kids


def main(argv: list[str] | None = None) -> int:
    from raytestbed.config import load_trial

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", default="demo_emu", help="a trial file or a shipped trial's name (replay compute)")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-ray", action="store_true", help="only the in-process run")
    ap.add_argument("--workers", default="pool,clock",
                    help="worker layouts to run through Ray, comma-separated (emu.workers: pool, clock)")
    ap.add_argument("--top", type=int, default=12, help="functions to list by own time")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    layouts = [w.strip() for w in args.workers.split(",") if w.strip()]
    if not layouts or any(w not in ("pool", "clock") for w in layouts):
        ap.error(f"--workers: a comma-separated list of pool, clock; got {args.workers!r}")
    loaded = load_trial(args.trial)
    if loaded.trial.emu.compute != "replay":
        raise SystemExit("emu-breakdown: replay compute only (real compute's time is the passes themselves)")
    seed = loaded.trial.seed if args.seed is None else args.seed

    res, wall_p, cpu_p, stats = in_process(loaded, args.policy, seed, profile=True)
    iters = sum(len(rows) for rows in res["measured"].values())
    skipped = sum(res["skipped"].values())
    records = list(res["records"].values()) if isinstance(res["records"], dict) else list(res["records"])
    total_jct = math.fsum(r.finish_s - r.job.arrival_s for r in records if math.isfinite(r.finish_s))
    own, funcs = parts(stats)
    prof_total = sum(own.values())
    res2, wall_q, cpu_q, _ = in_process(loaded, args.policy, seed, profile=False)
    records2 = list(res2["records"].values()) if isinstance(res2["records"], dict) else list(res2["records"])
    same = sorted((r.job.job_id, r.finish_s) for r in records2) == sorted((r.job.job_id, r.finish_s) for r in records)
    print(f"trial {loaded.trial.name}, policy {args.policy}: {len(records)} jobs, {iters} iterations run, "
          f"{skipped} fast-forwarded, emulated end {res['end_time_s']:.6g} s, total JCT {total_jct:.6g} s")
    print(f"in-process, unprofiled: {wall_q:.2f} s wall, {cpu_q:.2f} s CPU "
          f"({1e3 * wall_q / max(iters, 1):.2f} ms wall per iteration run); the same job times as the profiled run: "
          f"{'yes' if same else 'NO'}")
    print(f"in-process under cProfile: {wall_p:.2f} s wall, {cpu_p:.2f} s CPU; own CPU time per part "
          f"(ms per iteration run, scaled to the unprofiled run's CPU time):")
    scale = cpu_q / prof_total if prof_total > 0 else 0.0
    print("| part | own CPU s (profiled) | share | CPU ms per iteration (unprofiled) |")
    print("|---|---|---|---|")
    for p, s in sorted(own.items(), key=lambda kv: -kv[1]):
        print(f"| {p} | {s:.2f} | {100 * s / prof_total:.1f} % | {1e3 * s * scale / max(iters, 1):.2f} |")
    print("\nlargest own times:")
    for tt, name in funcs[:args.top]:
        print(f"  {tt:8.2f} s  {name}")
    if not args.no_ray:
        from benchmarks.emu import trial_copy

        out = args.out or Path(tempfile.mkdtemp(prefix="bench_emu_breakdown_"))
        out.mkdir(parents=True, exist_ok=True)
        walls: dict[str, float] = {}
        for layout in layouts:
            copy = trial_copy(Path(loaded.path), out, {"workers": layout}, f"workers_{layout}")
            summary, wall_r, cpu_r, kids_r = through_ray(str(copy), args.policy, out / f"ray_{layout}")
            e = summary["emulation"]
            walls[layout] = e["wall_s"]
            same_ray = abs(summary["total_jct_s"] - total_jct) <= 1e-9 * max(1.0, total_jct)
            print(f"\nthrough Ray, workers: {layout}: {wall_r:.2f} s wall for the whole command ({e['wall_s']:.2f} s "
                  f"of emulation after the cluster started, {e['emulated_s_per_wall_s']:.1f} emulated s per wall s), "
                  f"{cpu_r:.2f} s CPU in this process and {kids_r:.2f} s in Ray's processes (start-up "
                  f"included); iterations run {e['iterations_run']}, "
                  f"fast-forwarded {e['iterations_fast_forwarded']}; total JCT {summary['total_jct_s']:.6g} s "
                  f"({'equal to' if same_ray else 'DIFFERENT from'} the in-process run's)")
            ray_iters = max(e["iterations_run"], 1)
            print(f"per iteration run: {1e3 * e['wall_s'] / ray_iters:.2f} ms through Ray against "
                  f"{1e3 * wall_q / max(iters, 1):.2f} ms in-process: Ray's calls and processes add "
                  f"{1e3 * (e['wall_s'] - wall_q) / ray_iters:.2f} ms ({(e['wall_s'] - wall_q) / max(e['wall_s'], 1e-9):.0%} "
                  f"of the emulation's wall)")
        if len(walls) == 2 and walls.get("clock", 0) > 0:
            print(f"\nworkers: pool / workers: clock, emulation wall: {walls['pool']:.2f} / {walls['clock']:.2f} s "
                  f"= {walls['pool'] / walls['clock']:.1f}x")
    return 0
