"""Benchmark: `raytestbed bench sim [options]` (code: benchmarks/sim.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_sim.py [options]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sim", *sys.argv[1:]]))
