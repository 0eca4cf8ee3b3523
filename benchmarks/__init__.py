"""Benchmarks and one-off studies over the library, run from a source checkout as ``raytestbed bench NAME
[options]`` (results: docs/benchmarks.md). Not part of the installed package; ``raytestbed.cli.BENCHMARKS``
lists the names.

* ``emu``: the emulator's results and speed under host load (:mod:`.emu`);
* ``sweep``: a sweep in one process vs on a 2-node Ray cluster (:mod:`.sweep`);
* ``placement``: Heavy-Edge vs the optimal placement ILP, A-SRPT Table II (:mod:`.placement`);
* ``sim``: the simulator on 150,000 synthetic jobs (:mod:`.sim`);
* ``sim-fb``: the flow simulator on the Facebook coflow benchmark, beside an older revision (:mod:`.sim_fb`);
* ``gadget``: GADGET's per-slot solvers against the exact ILP, decision time (:mod:`.gadget`);
* ``sjfbco``: SJF-BCO's full planning search on the paper workload (:mod:`.sjfbco`);
* ``sjfbco-flow``: SJF-BCO eq. (8) vs flow-level iteration times (:mod:`.sjfbco_model_vs_flow`);
* ``fidelity``: emulated iteration time vs the analytic model, per preset and placement (:mod:`.fidelity`);
* ``emu-scale``: the emulator at scale, 64 GPUs in replay and 16 computing at once (:mod:`.emu_scale`);
* ``emu-breakdown``: where an emulated iteration's time goes (clock, fabric, worker code, Ray) (:mod:`.emu_breakdown`);
* ``soak-emu``: one emulated hour with faults, memory over time (:mod:`.soak_emu`);
* ``crosscheck-coflowsim``: the flow simulator against CoflowSim on the FB coflow benchmark
  (:mod:`.crosscheck_coflowsim`);
* ``asrpt-testbed``: the A-SRPT testbed study (§V-A, Fig. 5) on the emulator (:mod:`.asrpt_testbed`);
* ``profile-load``: profiles of the model presets quiet and beside busy processes (:mod:`.profile_load`);
* ``wcs-orders``: when ``wcs-duration`` and ``wcs-workload`` can decide differently (:mod:`.wcs_orders`);
* ``gavel``: Gavel's policies against Gavel's own simulator on the same traces (:mod:`.gavel`);
* ``network-parity``: network policies on the in-process emulator against the flow simulator (:mod:`.network_parity`).
"""
