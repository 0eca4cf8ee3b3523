"""Benchmark: `raytestbed bench sjfbco [options]` (code: benchmarks/sjfbco.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_sjfbco.py [options]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sjfbco", *sys.argv[1:]]))
