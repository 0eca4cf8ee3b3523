"""Benchmarks over library code, run as ``raytestbed bench NAME [options]`` (results: docs/benchmarks.md).

* ``sweep``: a sweep in one process vs on a 2-node Ray cluster (:mod:`.sweep`);
* ``placement``: Heavy-Edge vs the optimal placement ILP, A-SRPT Table II (:mod:`.placement`);
* ``sim``: the simulator on 150,000 synthetic jobs (:mod:`.sim`);
* ``sim-fb``: the flow simulator on the Facebook coflow benchmark, beside an older revision (:mod:`.sim_fb`);
* ``gadget``: GADGET's per-slot solvers against the exact ILP, decision time (:mod:`.gadget`);
* ``sjfbco``: SJF-BCO's full planning search on the paper workload (:mod:`.sjfbco`).

``emu`` (the emulator under host load) lives with the emulator (:mod:`raytestbed.emu.bench`).
"""

NAMES = ("sweep", "placement", "sim", "sim-fb", "gadget", "sjfbco", "sjfbco-flow")
