"""Cross-check: `raytestbed bench crosscheck-coflowsim [options]` (code: benchmarks/crosscheck_coflowsim.py; results: docs/benchmarks.md).

The flow simulator against CoflowSim on the Facebook coflow benchmark (526 FB2010 coflows, 150 ports):
average CCT per policy, rate and admission epoch, Varys bins, and with ``--coflowsim DIR`` CoflowSim's
own per-coflow output beside ours.

    PYTHONPATH=. python scripts/crosscheck_coflowsim.py --gbps 1.048576,10 --coflowsim COFLOWSIM_OUTPUT_DIR --out results/xcheck
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "crosscheck-coflowsim", *sys.argv[1:]]))
