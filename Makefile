# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs (CPU torch pinned first).
# Developer targets: `make test-slow` (the slow-marked tests), `make bench`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-slow bench clean

# The editable install's build step warns "Editable installation ... be careful with folders": setuptools'
# own note, nothing a user can act on; it is filtered on that one pip call.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/raytestbed compare workloads/trials/demo_emu.yaml --policies asrpt,fifo --backend emu:real --out results/demo --force

test: $(STAMP)
	$(PY) -m pytest

# the slow-marked tests (emulator soak-style checks, full-trace loads), each with a 900 s limit
test-slow: $(STAMP)
	$(PY) -m pytest -m slow --timeout=900

bench: $(STAMP)
	$(PY) scripts/bench_sim.py

clean:
	rm -rf results .pytest_cache
