"""Diagnosis: `raytestbed bench wcs-orders TRIAL [--seeds 1,2] [--jobs N]` (code: benchmarks/wcs_orders.py; findings: docs/asrpt.md).

When can ``wcs-duration`` and ``wcs-workload`` decide differently? Replays every ``wcs-duration``
scheduling call in the ``wcs-workload`` order and compares both policies' ``jobs.csv``.

    .venv/bin/python scripts/diag_wcs_orders.py workloads/trials/asrpt_aaic_paper.yaml --seeds 1,2,3,4
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "wcs-orders", *sys.argv[1:]]))
