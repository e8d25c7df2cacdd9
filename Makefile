# Every target bootstraps .venv by itself: on a fresh machine only python3 and make are needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test test-all pilot pilot-events pilot-month sample events-sample lint bench paper clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# the quick suite while working (slow tests left out); test-all is what CI runs. Tests run in
# one process more than the cores, up to four (pytest-xdist; "worksteal" evens out tests of
# unequal length): many tests wait on servers, clusters and processes they start, and on two
# cores three workers ran the suite in 723 s against 847 s for two (the same CPU time).
WORKERS ?= $(shell $(PYTHON) -c "import os; print(min((os.cpu_count() or 1) + 1, 4))")
# (recursive, so that the cores are counted in test recipes alone, not on every make)
PARALLEL = -n $(WORKERS) --dist worksteal

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow"

test-all: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PARALLEL)

pilot: $(STAMP)
	$(BIN)/finbench run configs/pilot.toml --out results/pilot
	$(BIN)/finbench report results/pilot

# the event track on the bundled synthetic event sample (language models join with a key)
pilot-events: $(STAMP)
	$(BIN)/finbench run configs/pilot_events.toml --out results/pilot_events
	$(BIN)/finbench report results/pilot_events

# a month of the synthetic sample: the report's inference (cutoff split, power, tests) at work
pilot-month: $(STAMP)
	$(BIN)/finbench run configs/pilot_month.toml --out results/pilot_month
	$(BIN)/finbench report results/pilot_month

events-sample: $(STAMP)
	rm -rf data/events_sample
	$(BIN)/finbench data synth-events --out data/events_sample

paper: pilot
	$(BIN)/finbench paper results/pilot --out paper
	@if command -v latexmk >/dev/null 2>&1; then \
		cd paper && latexmk -pdf -interaction=nonstopmode -quiet main.tex; \
	elif command -v pdflatex >/dev/null 2>&1; then \
		cd paper && pdflatex -interaction=nonstopmode main.tex >/dev/null && \
		pdflatex -interaction=nonstopmode main.tex >/dev/null && echo "built paper/main.pdf"; \
	else \
		echo "paper/tables and paper/figures are regenerated; to build paper/main.pdf install a"; \
		echo "TeX toolchain (e.g. Debian: apt-get install latexmk texlive-latex-recommended)."; \
	fi

sample: $(STAMP)
	$(BIN)/finbench data synth --out data/sample

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_spine.py
	$(BIN)/python benchmarks/bench_llm.py
	$(BIN)/python benchmarks/bench_bootstrap_coverage.py
	$(BIN)/python benchmarks/bench_scores3.py

clean:
	rm -rf $(VENV) *.egg-info
