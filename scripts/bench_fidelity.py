"""Benchmark: `raytestbed bench fidelity [options]` (code: benchmarks/fidelity.py; results: docs/benchmarks.md).

Fidelity of the emulated cluster: measured emulated iteration time vs the analytic model
(A-SRPT eq. (7) for pipeline jobs, SJF-BCO eq. (8) without contention for ring-all-reduce jobs),
per model preset, placement and compute mode (replay, real).

    python scripts/bench_fidelity.py [--presets a,b] [--modes replay,real] [--scenarios i,j] [--iterations N] [--json FILE]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "fidelity", *sys.argv[1:]]))
