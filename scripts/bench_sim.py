"""Benchmark: `raytestbed bench sim [options]` (code: raytestbed/experiments/benches/sim.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_sim.py [options]
"""

import sys

from raytestbed.experiments.benches.sim import main

if __name__ == "__main__":
    sys.exit(main())
