"""What a running job does, independent of the backend that runs it: the plan of a placed job's
workers (sizes, the 1F1B order, the ring's chunks; ``plan.py``), the worker program that every
stage replica and parameter server runs (``worker_program.py``), the driver half both backends
share and the compute strategies it runs the program with (``driver.py``, ``compute.py``), and the
rule that turns workers' per-mini-batch records into whole iterations (``monitor.py``). The
simulator (``sim/``) and the emulator (``emu/``) both import this package; neither imports the
other."""
