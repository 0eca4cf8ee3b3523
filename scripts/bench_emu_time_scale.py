"""Emulator vs simulator on one trial at several time scales: what slowing the emulated clock buys.

On a 2-core host every message of the emulated control plane (Ray calls, event-loop wake-ups)
costs ~5-20 ms of wall time. The logical clocks (docs/emulator.md, "Logical clock" and
"Logical timestamps") credit such delays up to ``MAX_BACKDATE_WALL_S`` (0.25 s wall) each; a job
whose chain of messages costs more wall time per iteration than its emulated iteration lasts is
still paced by the host. Running the emulated cluster slower than the wall clock
(``emu.time_scale`` < 1: emulated seconds per wall second) shrinks that cost in emulated time by
the same factor, at the price of wall time.

For every time scale this runs ``raytestbed parity`` (simulator vs emulator, same seed, jobs and
policies) and prints one row per policy: simulated and emulated total JCT, their ratio, the
makespan ratio and the emulator's wall seconds, all from one run of this script.

Usage::

    python scripts/bench_emu_time_scale.py                                   # the demo trial, 1 / 0.5 / 0.25
    python scripts/bench_emu_time_scale.py --scales 1,0.25 --policies fifo --out /tmp/ts
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytestbed.config import load_trial  # noqa: E402
from raytestbed.trial import parity_check  # noqa: E402


def with_time_scale(loaded, scale: float):
    """A copy of the loaded trial whose ``emu.time_scale`` is ``scale`` (emulated s per wall s)."""
    emu = loaded.trial.emu.model_copy(update={"time_scale": float(scale)})
    return loaded.model_copy(update={"trial": loaded.trial.model_copy(update={"emu": emu})})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trial", default=str(ROOT / "workloads/trials/demo_emu.yaml"))
    ap.add_argument("--scales", default="1,0.5,0.25", help="comma-separated emu.time_scale values")
    ap.add_argument("--policies", default="asrpt,fifo")
    ap.add_argument("--out", default=None, help="folder for the parity runs (default: a temporary one)")
    args = ap.parse_args(argv)
    try:
        scales = [float(x) for x in args.scales.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--scales {args.scales!r}: give numbers such as 1,0.5,0.25")
    if not scales or min(scales) <= 0:
        ap.error(f"--scales {args.scales!r}: every time scale must be > 0")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_ts_"))
    loaded = load_trial(args.trial)
    rows = []
    for scale in scales:
        print(f"time_scale {scale:g}: parity sim vs emu ...", flush=True)
        res = parity_check(with_time_scale(loaded, scale), out / f"scale_{scale:g}", policies, ("sim", "emu"),
                           force=True, show_progress=False)
        emu_cmp = pd.read_csv(out / f"scale_{scale:g}" / "emu" / "comparison.csv").set_index("policy")
        for r in res["policies"].to_dict("records"):
            rows.append({"time_scale": scale, "policy": r["policy"],
                         "sim_total_jct_s": r["total_jct_s_sim"], "emu_total_jct_s": r["total_jct_s_emu"],
                         "emu/sim total JCT": r["total_jct_s_emu"] / r["total_jct_s_sim"],
                         "emu/sim makespan": r["makespan_s_emu"] / r["makespan_s_sim"],
                         "ranking_same": res["ranking_agrees"], "emu_wall_s": float(emu_cmp.loc[r["policy"], "wall_s"])})
    df = pd.DataFrame(rows)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"runs: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
