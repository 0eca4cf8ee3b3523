"""Benchmark `raytestbed sweep`: 7 A-SRPT-paper policies x 4 seeds in one process vs on a 2-node Ray cluster.

    .venv/bin/python scripts/bench_sweep.py [--seeds 4] [--cpus-per-node 1]
    raytestbed bench sweep [...]

The code lives in benchmarks/sweep.py; results: docs/benchmarks.md.
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sweep", *sys.argv[1:]]))
