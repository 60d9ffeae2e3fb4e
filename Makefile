# AI Workload Lab. `make lab` to learn, `make test` to check everything, `make report` for CI and instructors.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Extra arguments for JupyterLab, e.g. `make lab LAB_ARGS=--no-browser` on a remote machine.
LAB_ARGS ?=
PROFILE ?= quick
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test unit processes notebooks browser lint report doctor clean

# Create the virtual environment on first use, and again whenever the pins change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[lab,test]"
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb \
		$(ROOT_ARG) $(LAB_ARGS)

# The whole suite: lint, unit tests, tests that start processes, every notebook (nbval; papermill injects the quick
# parameters and its exercises are solved after it),
# then notebook 00 in JupyterLab in a real Chromium (skipped where Chromium is missing, unless
# LABKIT_REQUIRE_BROWSER=1). No retries: timing claims are decided statistically (labkit.claims) and
# LABKIT_CLAIMS=strict fails a notebook only on a contradicted claim.
test: $(STAMP) lint unit processes notebooks browser

lint: $(STAMP)
	$(BIN)/ruff check labkit tests notebooks tools
	$(BIN)/ruff format --check labkit tests notebooks tools

unit: $(STAMP)
	LABKIT_PROFILE=quick LABKIT_HEADLESS=1 $(BIN)/python -m pytest tests -m "not notebooks and not browser and not processes"

# Tests that start worker processes, servers, kernels or papermill: slower, so a tier of their own.
processes: $(STAMP)
	LABKIT_PROFILE=quick LABKIT_HEADLESS=1 $(BIN)/python -m pytest tests -m processes

# Each notebook once, in one kernel: as the learner gets it, then its exercises solved (their checkers asserting), the
# quick parameters injected by papermill (tests/prepare_notebooks.py); nbval runs every cell and compares the checked
# ones; tests/test_notebooks.py then reads what each run recorded. LABKIT_AUDIT_PLOTS=1: every plt.show() fails on an
# axis without a unit or a colour outside the palette.
UNDER_TEST := build/under-test
notebooks: $(STAMP)
	rm -rf $(UNDER_TEST)
	$(BIN)/python tests/prepare_notebooks.py $(UNDER_TEST)
	LABKIT_HEADLESS=1 LABKIT_AUDIT_PLOTS=1 LABKIT_CLAIMS=strict LABKIT_RESULTS_DIR=$(CURDIR)/$(UNDER_TEST)/results \
		$(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=300 $(UNDER_TEST)/[0-9][0-9]_*.ipynb \
		tests/test_notebooks.py

browser: $(STAMP)
	$(BIN)/python -m pytest tests -m browser

report: $(STAMP)
	$(BIN)/python -m labkit report --profile $(PROFILE)

doctor: $(STAMP)
	$(BIN)/python -m labkit doctor

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache *.egg-info
