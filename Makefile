# Every target bootstraps .venv by itself: on a fresh machine only python3 and make are needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test pilot sample lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

pilot: $(STAMP)
	$(BIN)/finbench run configs/pilot.toml --out results/pilot

sample: $(STAMP)
	$(BIN)/finbench data synth --out data/sample

lint: $(STAMP)
	$(BIN)/ruff check finbench tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_spine.py

clean:
	rm -rf $(VENV) *.egg-info
