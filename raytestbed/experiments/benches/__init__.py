"""Benchmarks over library code, run as ``raytestbed bench NAME [options]`` (results: docs/benchmarks.md).

* ``sweep``: a sweep in one process vs on a 2-node Ray cluster (:mod:`.sweep`);
* ``placement``: Heavy-Edge vs the optimal placement ILP, A-SRPT Table II (:mod:`.placement`);
* ``sim``: the simulator on 150,000 synthetic jobs (:mod:`.sim`);
* ``gadget``: GADGET's per-slot solvers against the exact ILP, decision time (:mod:`.gadget`);
* ``sjfbco``: SJF-BCO's full planning search on the paper workload (:mod:`.sjfbco`).

``fabric`` (the emulator's fabric) lives with the emulator (:mod:`raytestbed.emu.bench`).
"""

NAMES = ("sweep", "placement", "sim", "gadget", "sjfbco")
