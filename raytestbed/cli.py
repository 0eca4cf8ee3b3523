"""The ``raytestbed`` command.

    raytestbed run TRIAL.yaml --backend sim|emu --out DIR [--policy NAME] [--seed N] [--force]
                              [--inject kill_server:1@120s]
    raytestbed run [TRIAL.yaml] --resume DIR          # continue an interrupted run
    raytestbed compare TRIAL.yaml --policies A,B,C --backend sim|emu --out DIR [--seed N] [--force] [--inject ...]
    raytestbed compare [TRIAL.yaml] --resume DIR
    raytestbed parity TRIAL.yaml --out DIR [--policies A,B] [--backends sim,emu] [--limit 0.10]
    raytestbed sweep SWEEP.yaml [--out DIR] [--address RAY_ADDRESS] [--workers N] [--serial] [--force]
    raytestbed reproduce PAPER [--fig N] [--quick] [--out DIR] [--workload W] [--write-docs]   # asrpt | sjfbco | gadget | parrot | gavel
    raytestbed policies [IMPORT_PATH ...]
    raytestbed workloads [IMPORT_PATH ...]
    raytestbed profile MODEL [--out FILE.json] [--stages 0,2,4] | --list

Bad input (config, trace row, flag) prints one line ``raytestbed: error: ...`` and
exits with status 2; nothing is left half-written, except that a run interrupted
(Ctrl-C / SIGINT, exit 130; SIGTERM, exit 143) after some jobs had finished leaves a
resumable folder (``--resume DIR``). ``parity``
exits with status 1 when the check fails.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from raytestbed.errors import RaytestbedError
from raytestbed.results.tables import text_table

# Each command imports what it runs inside its own function, so that ``raytestbed --help`` and a quick
# command do not load every backend: measured on a quiet 2-core host, ``raytestbed --help`` takes 0.45 s
# of wall; importing every command's module up front (the trial runner, the profiler with torch, the
# sweeps and reproductions) takes 6.3 s.


class _FlagError(RaytestbedError):
    """A bad command line (unknown flag, bad value); printed as one line like any input error."""


class _Parser(argparse.ArgumentParser):
    """argparse without the usage block on errors: a bad flag is one line and exit status 2."""

    def error(self, message: str):  # noqa: D102 - argparse API
        command = self.prog.removeprefix("raytestbed").strip()
        raise _FlagError(f"{command + ': ' if command else ''}{message} (see '{self.prog} --help')")


def _seed(text: str) -> int:
    """``--seed``: an integer in [0, MAX_SEED]."""
    from raytestbed.config import MAX_SEED

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 2**63 - 1]")
    return v


SHOWN = ["policy", "rank", "jobs", "finished", "unfinished", "total_jct_s", "avg_jct_s", "makespan_s", "gpu_utilisation",
         "total_utility", "avg_cct_s", "p95_cct_s", "ratio_to_lb", "decision_time_p50_s", "decision_time_p99_s",
         "wall_s"]


def _load(args, command: str):
    """The trial, policies, seed, backend and injected faults of a run/compare (from the marker on --resume)."""
    from raytestbed.config import load_trial
    from raytestbed.trial import read_resumable

    if args.resume:
        if args.out and Path(args.out) != Path(args.resume):
            raise RaytestbedError("--resume DIR replaces --out: give one of them")
        if args.force:
            raise RaytestbedError("--resume and --force exclude each other")
        mark = read_resumable(Path(args.resume))
        if mark.get("command") != command:
            raise RaytestbedError(f"--resume {args.resume}: it is an interrupted '{mark.get('command')}', "
                                  f"not '{command}'")
        trial = args.trial or mark.get("trial")
        if not trial:
            raise RaytestbedError(f"--resume {args.resume}: give the trial file")
        for flag, key in (("seed", "seed"), ("backend", "backend")):
            given = getattr(args, flag)
            if given is not None and str(given) != str(mark.get(key)):
                raise RaytestbedError(f"--{flag} {given}: the interrupted run used {mark.get(key)}")
        if args.inject:
            raise RaytestbedError("--inject cannot change the faults of an interrupted run")
        loaded = load_trial(trial)
        _check_backend(mark["backend"])
        return loaded, mark["policies"], mark["seed"], mark["backend"], mark.get("inject") or [], Path(args.resume)
    if not args.trial or not args.out:
        raise RaytestbedError(f"{command}: give TRIAL.yaml and --out DIR (or --resume DIR)")
    loaded = load_trial(args.trial)
    backend = args.backend or loaded.trial.backend
    _check_backend(backend)
    return loaded, None, args.seed, backend, args.inject or [], Path(args.out)


def _cmd_run(args) -> int:
    from raytestbed.trial import run

    loaded, pols, seed, backend, inject, out = _load(args, "run")
    policy = pols[0] if pols else args.policy
    summary = run(loaded, out, policy=policy, seed=seed, force=args.force, show_progress=not args.quiet,
                  backend=backend, inject=inject, resume=bool(args.resume))
    row = dict(summary)
    if summary.get("network_policy"):
        row["policy"] = f"{summary['policy']}+{summary['network_policy']}"
    print(text_table([row], [c for c in SHOWN if c in row and c != "rank"]))
    if summary.get("note"):
        print(f"{row['policy']}: {summary['note']}")
    print(f"results: {out}  (report: {out / 'report.md'})")
    if summary.get("unfinished"):
        print(f"raytestbed: {_unfinished(summary)}", file=sys.stderr)
        return 0 if loaded.trial.timing.until_s is not None else 1
    return 0


def _unfinished(summary: dict) -> str:
    """``3 of 12 jobs unfinished (jobs 4, 7, 9)``: the jobs a run left unfinished (summary.json ``unfinished_jobs``)."""
    ids = summary.get("unfinished_jobs") or []
    shown = ", ".join(map(str, ids[:20])) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "")
    return f"{summary['unfinished']} of {summary['jobs']} jobs unfinished (jobs {shown}; summary.json unfinished_jobs)"


def _cmd_compare(args) -> int:
    from raytestbed.trial import compare

    loaded, pols, seed, backend, inject, out = _load(args, "compare")
    if pols is None:
        if not args.policies:
            raise RaytestbedError("--policies: give at least one policy id")
        pols = [p.strip() for p in args.policies.split(",") if p.strip()]
        if not pols:
            raise RaytestbedError("--policies: give at least one policy id")
    df = compare(loaded, out, pols, seed=seed, force=args.force, show_progress=not args.quiet, backend=backend,
                 inject=inject, resume=bool(args.resume))
    from raytestbed.results.ranking import complete, rank_labels, summary_line

    print(text_table(df.assign(rank=rank_labels(df)).to_dict("records"), [c for c in SHOWN if c in df.columns]))
    if "note" in df.columns:  # a resumed policy: whether its re-run reproduced the journal
        for policy, note in zip(df["policy"], df["note"]):
            if isinstance(note, str) and note:
                print(f"{policy}: {note}")
    print(summary_line(df))
    print(f"results: {out}  (comparison.csv; report: {out / 'report.md'})")
    stranded = [r for _, r in df.iterrows() if not complete(r)]
    if stranded and loaded.trial.timing.until_s is None:
        return 1  # a policy left jobs unfinished: the comparison is not a clean ranking
    return 0


def _cmd_parity(args) -> int:
    from raytestbed.config import load_trial
    from raytestbed.trial import parity_check

    loaded = load_trial(args.trial)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if len(backends) != 2:
        raise RaytestbedError(f"--backends {args.backends!r}: give two backends, e.g. sim,emu")
    for b in backends:
        _check_backend(b)
    pols = [p.strip() for p in (args.policies or "").split(",") if p.strip()]
    if not pols:
        t = loaded.trial
        pols = [t.policy + (f"+{t.network_policy}" if t.network_policy and "+" not in t.policy else "")]
    res = parity_check(loaded, Path(args.out), pols, backends, seed=args.seed, limit=args.limit, force=args.force,
                       show_progress=not args.quiet, inject=args.inject)
    df = res["policies"]
    print(text_table(df.to_dict("records"), list(df.columns)))
    print(f"ranking by total JCT: {res['a']}: {', '.join(res['ranking_a'])}; "
          f"{res['b']}: {', '.join(res['ranking_b'])} ({'same' if res['ranking_agrees'] else 'DIFFERENT'})")
    for _, r in df.iterrows():
        if r.get("unfinished_one_side"):
            print(f"{r['policy']}: jobs finished on one backend only: {r['unfinished_one_side']}")
    verdict = "PASS" if res["passed"] else "FAIL"
    print(f"parity {verdict} (limit ±{res['limit']:.0%} on total JCT and makespan, identical ranking); "
          f"report: {Path(args.out) / 'parity.md'}")
    return 0 if res["passed"] else 1


def _listing(rows: list[tuple[str, str, str]]) -> list[str]:
    """``name  origin  description`` lines, aligned."""
    w_name = max((len(r[0]) for r in rows), default=0)
    w_origin = max((len(r[1]) for r in rows), default=0)
    return [f"  {n:<{w_name}}  {o:<{w_origin}}  {d}".rstrip() for n, o, d in rows]


def _cmd_policies(args) -> int:
    from raytestbed.schedulers.base import POLICIES, describe_policy

    plugins = POLICIES.all(args.names)
    for role in ("placement", "network"):
        print(f"{role} policies:")
        print("\n".join(_listing([(p.name, p.origin, describe_policy(p.obj)) for p in plugins
                                  if p.obj.role == role])))
    for name in POLICIES.shadowed():
        print(f"note: entry point {name} is ignored: a built-in policy has that name")
    return 0


def _cmd_workloads(args) -> int:
    from raytestbed.plugins import describe
    from raytestbed.traces.registry import WORKLOADS

    print("workload kinds:")
    print("\n".join(_listing([(p.name, p.origin, describe(p.obj)) for p in WORKLOADS.all(args.names)])))
    for name in WORKLOADS.shadowed():
        print(f"note: entry point {name} is ignored: a built-in workload kind has that name")
    return 0


def _cmd_profile(args) -> int:
    from raytestbed.models import PRESETS

    if args.list or not args.model:
        for name, p in PRESETS.items():
            print(f"  {name:<14} {p.description}")
        return 0
    from raytestbed.models import build_model
    from raytestbed.profile.profiler import profile_model

    try:
        model = build_model(args.model, seed=args.seed)
    except ValueError as e:
        raise RaytestbedError(str(e)) from None
    if args.batch_size is not None and args.batch_size < 1:
        raise RaytestbedError("--batch-size must be >= 1")
    if args.repeats < 1 or args.warmup < 0:
        raise RaytestbedError("--repeats must be >= 1 and --warmup >= 0")
    bounds = None
    if args.stages:
        try:
            bounds = [int(x) for x in args.stages.split(",")]
        except ValueError:
            raise RaytestbedError(f"--stages {args.stages!r}: give start layer indices, e.g. 0,3,6") from None
    if args.threads < 1:
        raise RaytestbedError("--threads must be >= 1")
    if args.max_seconds is not None and not args.max_seconds >= 0:
        raise RaytestbedError(f"--max-seconds {args.max_seconds}: give seconds >= 0")
    print(f"profiling {args.model} on {args.device}: {args.warmup} warm-up + {args.repeats} measured runs", flush=True)
    limit = {} if args.max_seconds is None else {"max_time_s": args.max_seconds}
    prof = profile_model(model, args.batch_size, args.warmup, args.repeats, args.threads, device=args.device, **limit)
    if bounds is not None:
        stages = prof.stage_profiles(bounds)
    else:
        stages = prof.stage_profiles(list(range(prof.num_layers)))
        bounds = list(range(prof.num_layers))
    rows = []
    for i, (start, st) in enumerate(zip(bounds, stages)):
        end = bounds[i + 1] if i + 1 < len(bounds) else prof.num_layers
        rows.append({"stage": i, "layers": f"{start}-{end - 1}", "fwd_ms": st.fwd_s * 1e3, "bwd_ms": st.bwd_s * 1e3,
                     "in_bytes": stages[i - 1].out_bytes if i else 0, "out_bytes": st.out_bytes,
                     "param_bytes": st.param_bytes})
    print(text_table(rows, ["stage", "layers", "fwd_ms", "bwd_ms", "in_bytes", "out_bytes", "param_bytes"]))
    m = prof.measurement
    load = max((x for x in m["load_per_core"] if x is not None), default=None)
    print(f"device: {prof.device}, torch {m['torch']}, {m['method']}; iteration "
          f"{prof.total_compute_s * 1e3:.2f} ms, spread {m['spread']:.1%} (IQR/median; {m['iterations']} "
          f"iterations)"
          + (f", host load {load:.2f} per core" if load is not None else ""))
    for w in m["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if args.out:
        prof.save(args.out)
        print(f"profile: {args.out}")
    return 0


def _check_backend(backend: str) -> None:
    """Refuse a backend this installation cannot run (one line, exit 2)."""
    from raytestbed.trial import BackendSpec

    missing = BackendSpec.parse(backend).backend.missing()
    if missing:
        raise RaytestbedError(f"--backend {backend}: {missing}")


def _cmd_sweep(args) -> int:
    from raytestbed.experiments import load_sweep, run_sweep
    from raytestbed.experiments.runner import print_failures

    sweep = load_sweep(args.sweep)
    out = Path(args.out) if args.out else Path("results") / "sweeps" / sweep.name
    res = run_sweep(sweep, out, executor="serial" if args.serial else "ray", address=args.address,
                    workers=args.workers, show_progress=not args.quiet, force=args.force, reuse=tuple(args.reuse))
    reused = f" ({len(res.reused)} of them copied from --reuse folders)" if res.reused else ""
    print(f"sweep {sweep.name}: {len(res.ran)} cells run, {len(res.kept)} kept from before{reused}, {len(res.failed)} "
          f"failed ({res.wall_s:.0f} s)")
    print_failures(res)
    print(f"results: {out}  (sweep.csv, aggregate.csv; report: {out / 'report.md'})")
    return 1 if res.failed else 0


def _cmd_reproduce(args) -> int:
    from raytestbed.config import REPO_ROOT
    from raytestbed.experiments.reproduce import reproduce

    tag = args.paper + (f"-{args.workload}" if args.workload else "") + ("-quick" if args.quick else "")
    out = Path(args.out) if args.out else Path("results") / "reproduce" / tag
    results_md = None
    if args.write_docs and args.results_md:
        raise RaytestbedError("--write-docs and --results-md exclude each other: give one page")
    if args.results_md:
        results_md = Path(args.results_md)
        if not results_md.parent.is_dir():
            raise RaytestbedError(f"--results-md {results_md}: no such folder")
    elif args.write_docs:
        results_md = REPO_ROOT / "docs" / "results.md"
        if not results_md.parent.is_dir():
            raise RaytestbedError(f"--write-docs: {results_md.parent} is not a checkout's docs folder "
                                  f"(give --results-md FILE)")
    if args.quick and results_md is not None:
        flag = "--results-md" if args.results_md else "--write-docs"
        raise RaytestbedError(f"--quick is a smoke test of the pipeline: it issues no verdict and never writes a "
                              f"results page (drop {flag} or --quick)")
    from raytestbed.experiments.papers import workloads

    if results_md is not None and args.workload and args.workload != (workloads(args.paper) or (None,))[0]:
        raise RaytestbedError(f"--workload {args.workload}: the results page records the papers' own settings; "
                              f"drop --write-docs / --results-md")
    rep = reproduce(args.paper, args.fig, args.quick, out, executor="serial" if args.serial else "ray",
                    address=args.address, workers=args.workers, force=args.force, show_progress=not args.quiet,
                    results_md=results_md, workload=args.workload, reuse=tuple(args.reuse))
    claims = f"; claims in {rep.results_md}" if rep.results_md else ""
    print(f"results: {out}  (paper beside ours: {rep.md}{claims})")
    if results_md is not None and rep.results_md is None:
        print(f"raytestbed: {results_md} left as it was: {rep.not_written}", file=sys.stderr)
    return 1 if rep.failed or (results_md is not None and rep.results_md is None) else 0


#: ``raytestbed bench NAME``: the benchmarks and studies of the source tree's ``benchmarks/`` folder (one module
#: each, ``-`` for ``_``; not part of the installed package)
BENCHMARKS = ("emu", "sweep", "placement", "sim", "sim-fb", "gadget", "sjfbco", "sjfbco-flow", "fidelity", "emu-scale",
              "emu-breakdown", "soak-emu", "crosscheck-coflowsim", "asrpt-testbed", "wcs-orders", "profile-load",
              "gavel", "network-parity")


def benchmark_module(name: str) -> str:
    """The module of ``benchmarks/`` that runs ``raytestbed bench NAME``."""
    return {"sjfbco-flow": "sjfbco_model_vs_flow"}.get(name, name.replace("-", "_"))


def _checkout() -> Path:
    """The folder above the ``raytestbed`` package: a source checkout's root (or, installed, site-packages)."""
    return Path(__file__).resolve().parents[1]


def _cmd_bench(args) -> int:
    import importlib

    checkout = _checkout()
    if not ((checkout / "benchmarks" / "__init__.py").is_file() and (checkout / "pyproject.toml").is_file()):
        raise RaytestbedError(f"bench {args.name}: the benchmarks live in a source checkout (its benchmarks/ folder), "
                              f"not in the installed package; run this command from a checkout of raytestbed")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    return importlib.import_module(f"benchmarks.{benchmark_module(args.name)}").main(args.args)


#: ``--reuse`` of ``sweep`` and ``reproduce``
REUSE_HELP = ("another sweep or reproduction folder: its finished cells of the same fingerprint (the same trial, "
              "policy, seed and backend) are copied in instead of run; repeatable")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="raytestbed", description="GPU-cluster scheduler testbed: simulate or "
                                "emulate DDL job scheduling policies.")
    sub = p.add_subparsers(dest="command", required=True)

    backends = ["sim", "sim:analytic", "sim:flow", "emu", "emu:replay", "emu:real"]
    inject_help = ("inject a fault, e.g. kill_server:1@120s (server 1 dies at t = 120 s) or slow_nic:2@300s:x4 "
                   "(server 2's NIC 4x slower from t = 300 s); repeatable")
    resume_help = "continue the interrupted run in DIR (finished jobs are kept, see docs/trials.md)"
    r = sub.add_parser("run", help="run one trial with one policy (or policy pair a+b)")
    r.add_argument("trial", nargs="?", help="trial YAML file (see docs/trials.md)")
    r.add_argument("--backend", choices=backends, default=None, help="backend (default: the trial's)")
    r.add_argument("--out", help="results folder to create")
    r.add_argument("--policy", help="policy id, or placement+network pair (default: the trial's)")
    r.add_argument("--seed", type=_seed, help="seed (default: the trial's)")
    r.add_argument("--force", action="store_true", help="replace an existing results folder")
    r.add_argument("--inject", action="append", metavar="FAULT", help=inject_help)
    r.add_argument("--resume", metavar="DIR", help=resume_help)
    r.add_argument("--debug", action="store_true", help="with an error, print its traceback too (e.g. "
                   "a policy's exception)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(fn=_cmd_run)

    c = sub.add_parser("compare", help="run several policies on the same jobs side by side")
    c.add_argument("trial", nargs="?")
    c.add_argument("--policies", help="comma-separated policy ids, e.g. fifo,asrpt")
    c.add_argument("--backend", choices=backends, default=None)
    c.add_argument("--out")
    c.add_argument("--seed", type=_seed)
    c.add_argument("--force", action="store_true")
    c.add_argument("--inject", action="append", metavar="FAULT", help=inject_help)
    c.add_argument("--resume", metavar="DIR", help=resume_help)
    c.add_argument("--debug", action="store_true", help="with an error, print its traceback too (e.g. "
                   "a policy's exception)")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(fn=_cmd_compare)

    pa = sub.add_parser("parity", help="run a trial on two backends and compare JCTs, makespan and ranking")
    pa.add_argument("trial")
    pa.add_argument("--out", required=True, help="folder for both compare folders and parity.md")
    pa.add_argument("--policies", help="comma-separated policy ids (default: the trial's policy)")
    pa.add_argument("--backends", default="sim,emu", help="two backends, e.g. sim,emu or sim:analytic,sim:flow")
    pa.add_argument("--limit", type=float, default=0.10, help="pass limit on |relative difference| (0.10 = 10%%)")
    pa.add_argument("--seed", type=_seed)
    pa.add_argument("--force", action="store_true")
    pa.add_argument("--inject", action="append", metavar="FAULT", help=inject_help)
    pa.add_argument("--debug", action="store_true", help="with an error, print its traceback too (e.g. "
                   "a policy's exception)")
    pa.add_argument("--quiet", action="store_true")
    pa.set_defaults(fn=_cmd_parity)

    pf = sub.add_parser("profile", help="measure a model preset per layer into a profile file")
    pf.add_argument("model", nargs="?", help="model preset (see --list)")
    pf.add_argument("--list", action="store_true", help="list the model presets")
    pf.add_argument("--out", help="profile JSON to write (format: raytestbed/core/profile.py)")
    pf.add_argument("--stages", help="print per-stage totals for these start layers, e.g. 0,2,4")
    pf.add_argument("--batch-size", type=int, help="mini-batch size (default: the preset's)")
    pf.add_argument("--repeats", type=int, default=21, help="measured runs (median): at least this many iterations, "
                    "and more until every pass has this many runs no context switch went cold (see --max-seconds)")
    pf.add_argument("--max-seconds", type=float, default=None,
                    help="stop adding iterations for more warm runs once the measured passes took this long "
                    "(seconds; default 10)")
    pf.add_argument("--warmup", type=int, default=3, help="unmeasured warm-up runs")
    pf.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu",
                    help="cpu: thread CPU time; cuda: CUDA event time (measured on the CPU, with a warning, when "
                    "torch sees no CUDA device); auto: cuda if torch sees one")
    pf.add_argument("--threads", type=int, default=1, help="torch threads (1 = one emulated GPU per core)")
    pf.add_argument("--seed", type=int, default=0)
    pf.set_defaults(fn=_cmd_profile)

    bn = sub.add_parser("bench", help="run a benchmark or study of a source checkout's benchmarks/ folder (emu: the "
                        "emulator's results under host load, and its speed; sweep: a sweep in one process vs on a "
                        "2-node Ray cluster; placement, sim, sim-fb, gadget, sjfbco, sjfbco-flow, fidelity, emu-scale, emu-breakdown, "
                        "soak-emu, crosscheck-coflowsim, asrpt-testbed, wcs-orders, profile-load, gavel, network-parity)")
    bn.add_argument("name", choices=BENCHMARKS, help="which benchmark")
    bn.add_argument("args", nargs=argparse.REMAINDER, help="options of the benchmark (e.g. --quick)")
    bn.set_defaults(fn=_cmd_bench)

    sw = sub.add_parser("sweep", help="run trials x grid x policies x seeds as Ray tasks (resumable)")
    sw.add_argument("sweep", help="sweep YAML file (see docs/sweeps.md)")
    sw.add_argument("--out", help="sweep folder (default results/sweeps/NAME); re-running continues it")
    sw.add_argument("--address", help="Ray cluster to run the cells on (default: a local Ray on all cores)")
    sw.add_argument("--workers", type=int, help="local Ray: CPUs to use (default: all cores)")
    sw.add_argument("--serial", action="store_true", help="run the cells one after the other in this process")
    sw.add_argument("--force", action="store_true", help="discard finished cells and run every cell again")
    sw.add_argument("--reuse", action="append", default=[], metavar="DIR", help=REUSE_HELP)
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.set_defaults(fn=_cmd_sweep)

    rp = sub.add_parser("reproduce", help="run a paper's figures as sweeps, the paper's numbers beside ours")
    rp.add_argument("paper", choices=["asrpt", "sjfbco", "gadget", "parrot", "gavel"])
    rp.add_argument("--fig", help="figures, e.g. 4 or fig5,fig6 (default: the paper's main figures)")
    rp.add_argument("--quick", action="store_true", help="a smoke test of the pipeline at small sizes (a few "
                    "minutes per paper): our numbers, no verdict")
    rp.add_argument("--workload", help="asrpt: the trace the job sets come from, aaic (default) | google (the Google "
                    "2011 trace), each fitting the predictors on every earlier trace row, or aaic-window | "
                    "google-window: on only the 20,000 rows before each set; gadget: the arrival pattern, "
                    "poisson (default) | google | philly | aaic")
    rp.add_argument("--out", help="folder (default results/reproduce/PAPER[-quick]); re-running continues it")
    rp.add_argument("--address", help="Ray cluster to run the cells on (default: a local Ray on all cores)")
    rp.add_argument("--workers", type=int, help="local Ray: CPUs to use (default: all cores)")
    rp.add_argument("--serial", action="store_true", help="run the cells one after the other in this process")
    rp.add_argument("--force", action="store_true", help="run every cell again")
    rp.add_argument("--reuse", action="append", default=[], metavar="DIR", help=REUSE_HELP)
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.add_argument("--write-docs", action="store_true", help="write the claims into the project's "
                    "docs/results.md (full runs only, and only if every cell finished)")
    rp.add_argument("--results-md", metavar="FILE", help="write the claims into this results page instead")
    rp.set_defaults(fn=_cmd_reproduce)

    pl = sub.add_parser("policies", help="list the available policies and where each comes from")
    pl.add_argument("names", nargs="*", metavar="IMPORT_PATH",
                    help="also load and list these plug-ins, e.g. my_sched.policies:GreedyPolicy")
    pl.set_defaults(fn=_cmd_policies)

    wl = sub.add_parser("workloads", help="list the workload kinds and where each comes from")
    wl.add_argument("names", nargs="*", metavar="IMPORT_PATH",
                    help="also load and list these plug-ins, e.g. my_traces:load_mytrace")
    wl.set_defaults(fn=_cmd_workloads)

    from raytestbed.data.commands import add_parser as add_data_parser

    add_data_parser(sub)
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like Ctrl-C, so results folders are cleaned up or left resumable."""


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM must not cut the clean-up short
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Run the command; 0 on success, 2 on bad input (one line on stderr), 130 on Ctrl-C, 143 on SIGTERM."""
    import threading

    on_main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _on_sigterm) if on_main else None
    args = None
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except RaytestbedError as e:
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
            if getattr(e, "detail", "") and e.__cause__ is None:  # raised in the emulator's clock actor
                print(f"in the policy:\n{e.detail}", file=sys.stderr, end="")
        print(f"raytestbed: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        out = getattr(args, "resume", None) or getattr(args, "out", None)
        what = "terminated" if isinstance(e, Terminated) else "interrupted"
        if out and (Path(out) / "RESUMABLE.json").exists():
            print(f"raytestbed: {what}; finished jobs are journaled in {out}: continue with "
                  f"'raytestbed {args.command} --resume {out}'", file=sys.stderr)
        else:
            print(f"raytestbed: {what}; no results folder was written", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except BrokenPipeError:  # the reader went away (`raytestbed policies | head`): stop quietly, as a shell tool does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit would raise again
        return 141
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
