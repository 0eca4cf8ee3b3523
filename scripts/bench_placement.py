"""Benchmark Heavy-Edge GPU mapping vs the optimal placement ILP (A-SRPT Table II).

    .venv/bin/python scripts/bench_placement.py [--cases 20] [--gpus 16] [--random-jobs 200] [--config ...]
    raytestbed bench placement [...]

The code lives in benchmarks/placement.py and raytestbed/experiments/papers/asrpt_table2.py; results: docs/benchmarks.md.
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "placement", *sys.argv[1:]]))
