"""The ``raytestbed`` command.

    raytestbed run TRIAL.yaml --backend sim --out DIR [--policy NAME] [--seed N] [--force]
    raytestbed compare TRIAL.yaml --policies A,B,C --backend sim --out DIR [--seed N] [--force]
    raytestbed policies
    raytestbed profile MODEL [--out FILE.json] [--stages 0,2,4] | --list

Bad input (config, trace row, flag) prints one line ``raytestbed: error: ...`` and
exits with status 2; nothing is left half-written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raytestbed.errors import RaytestbedError


def _table(rows: list[dict], cols: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.4e}"
        return "-" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


SHOWN = ["policy", "jobs", "finished", "total_jct_s", "avg_jct_s", "makespan_s", "gpu_utilisation",
         "decision_time_p50_s", "decision_time_p99_s", "wall_s"]


def _cmd_run(args) -> int:
    from raytestbed.config import load_trial
    from raytestbed.trial import run

    loaded = load_trial(args.trial)
    _check_backend(args.backend, loaded)
    summary = run(loaded, Path(args.out), policy=args.policy, seed=args.seed, force=args.force,
                  show_progress=not args.quiet)
    row = dict(summary)
    if summary.get("network_policy"):
        row["policy"] = f"{summary['policy']}+{summary['network_policy']}"
    print(_table([row], SHOWN))
    print(f"results: {args.out}  (report: {Path(args.out) / 'report.md'})")
    return 0


def _cmd_compare(args) -> int:
    from raytestbed.config import load_trial
    from raytestbed.trial import compare

    loaded = load_trial(args.trial)
    _check_backend(args.backend, loaded)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise RaytestbedError("--policies: give at least one policy id")
    df = compare(loaded, Path(args.out), policies, seed=args.seed, force=args.force, show_progress=not args.quiet)
    print(_table(df.to_dict("records"), [c for c in SHOWN if c in df.columns]))
    print(f"results: {args.out}  (comparison.csv; report: {Path(args.out) / 'report.md'})")
    return 0


def _cmd_policies(args) -> int:
    from raytestbed.schedulers.base import available_policies

    pols = available_policies()
    for role in ("placement", "network"):
        print(f"{role} policies:")
        for name, cls in pols.items():
            if cls.role == role:
                print(f"  {name:<14} {cls.description}")
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
    prof = profile_model(model, args.batch_size, args.warmup, args.repeats, args.threads)
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
    print(_table(rows, ["stage", "layers", "fwd_ms", "bwd_ms", "in_bytes", "out_bytes", "param_bytes"]))
    if args.out:
        prof.save(args.out)
        print(f"profile: {args.out}")
    return 0


def _check_backend(backend: str | None, loaded) -> None:
    chosen = backend or loaded.trial.backend
    if chosen != "sim":
        raise RaytestbedError(f"--backend {chosen}: only the 'sim' backend is available in this version")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="raytestbed", description="GPU-cluster scheduler testbed: simulate or "
                                "emulate DDL job scheduling policies.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one trial with one policy (or policy pair a+b)")
    r.add_argument("trial", help="trial YAML file (see docs/trials.md)")
    r.add_argument("--backend", choices=["sim"], default=None, help="backend (default: the trial's)")
    r.add_argument("--out", required=True, help="results folder to create")
    r.add_argument("--policy", help="policy id, or placement+network pair (default: the trial's)")
    r.add_argument("--seed", type=int, help="seed (default: the trial's)")
    r.add_argument("--force", action="store_true", help="replace an existing results folder")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(fn=_cmd_run)

    c = sub.add_parser("compare", help="run several policies on the same jobs side by side")
    c.add_argument("trial")
    c.add_argument("--policies", required=True, help="comma-separated policy ids, e.g. fifo,asrpt")
    c.add_argument("--backend", choices=["sim"], default=None)
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int)
    c.add_argument("--force", action="store_true")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(fn=_cmd_compare)

    pf = sub.add_parser("profile", help="measure a model preset per layer into a profile file")
    pf.add_argument("model", nargs="?", help="model preset (see --list)")
    pf.add_argument("--list", action="store_true", help="list the model presets")
    pf.add_argument("--out", help="profile JSON to write (format: raytestbed/core/profile.py)")
    pf.add_argument("--stages", help="print per-stage totals for these start layers, e.g. 0,2,4")
    pf.add_argument("--batch-size", type=int, help="mini-batch size (default: the preset's)")
    pf.add_argument("--repeats", type=int, default=5, help="measured runs (median)")
    pf.add_argument("--warmup", type=int, default=2, help="unmeasured warm-up runs")
    pf.add_argument("--threads", type=int, default=1, help="torch threads (1 = one emulated GPU per core)")
    pf.add_argument("--seed", type=int, default=0)
    pf.set_defaults(fn=_cmd_profile)

    pl = sub.add_parser("policies", help="list the available policies")
    pl.set_defaults(fn=_cmd_policies)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except RaytestbedError as e:
        print(f"raytestbed: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("raytestbed: interrupted; no results folder was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
