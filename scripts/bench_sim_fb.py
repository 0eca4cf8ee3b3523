"""Benchmark: `raytestbed bench sim-fb [options]` (code: benchmarks/sim_fb.py; results: docs/benchmarks.md).

The flow simulator on the Facebook coflow benchmark, this checkout beside an older revision
(``--before-rev REV``, run in its own process from ``git archive``) with equal results.

    .venv/bin/python scripts/bench_sim_fb.py [--limit N] [--schemes a,b] [--before-rev REV] [options]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sim-fb", *sys.argv[1:]]))
