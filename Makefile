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
# Each tier of `make test` notes its seconds in build/tier-times.json (tools/render_docs.py states them in CONTRIBUTING).
TIER = $(PYTHON) tools/tier_time.py

.PHONY: lab test unit processes notebooks nb browser lint docs report book doctor clean

# Create the virtual environment on first use, and again whenever the pins change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[lab,test,book]"
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --LabApp.default_url=/lab/tree/notebooks/start_here.ipynb \
		$(ROOT_ARG) $(LAB_ARGS)

# The whole suite: lint, unit tests, tests that start processes, every notebook (nbval; papermill injects the quick
# parameters and its exercises are solved after it),
# then notebook `start_here` in JupyterLab in a real Chromium (skipped where Chromium is missing, unless
# LABKIT_REQUIRE_BROWSER=1). No retries: timing claims are decided statistically (labkit.claims) and
# LABKIT_CLAIMS=strict fails a notebook only on a contradicted claim.
test: $(STAMP) lint unit processes notebooks browser

lint: $(STAMP)
	@$(TIER) start lint
	$(BIN)/ruff check labkit tests notebooks tools
	$(BIN)/ruff format --check labkit tests notebooks tools
	$(BIN)/mypy
	@$(TIER) stop lint

unit: $(STAMP)
	@$(TIER) start unit
	LABKIT_PROFILE=quick LABKIT_HEADLESS=1 $(BIN)/python -m pytest tests -m "not notebooks and not browser and not processes"
	@$(TIER) stop unit

# Tests that start worker processes, servers, kernels or papermill: slower, so a tier of their own.
processes: $(STAMP)
	@$(TIER) start processes
	LABKIT_PROFILE=quick LABKIT_HEADLESS=1 $(BIN)/python -m pytest tests -m processes
	@$(TIER) stop processes

# Each notebook once, in one kernel: as the learner gets it, then its exercises solved (their checkers asserting), the
# quick parameters injected by papermill (tests/prepare_notebooks.py); nbval runs every cell and compares the checked
# ones; tests/test_notebooks.py then reads what each run recorded. LABKIT_AUDIT_PLOTS=1: every plt.show() fails on an
# axis without a unit or a colour outside the palette.
UNDER_TEST := build/under-test
SLUGS = $(shell $(BIN)/python -c "from labkit.lab import manifest; print(*manifest.slugs())")
NBVAL = LABKIT_HEADLESS=1 LABKIT_AUDIT_PLOTS=1 LABKIT_CLAIMS=strict LABKIT_RESULTS_DIR=$(CURDIR)/$(UNDER_TEST)/results \
	$(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=300
notebooks: $(STAMP)
	@$(TIER) start notebooks
	rm -rf $(UNDER_TEST)
	$(BIN)/python tests/prepare_notebooks.py $(UNDER_TEST)
	$(NBVAL) $(foreach s,$(SLUGS),$(UNDER_TEST)/$(s).ipynb) tests/test_notebooks.py
	@$(TIER) stop notebooks

# One notebook as `make notebooks` runs it, e.g. `make nb NB=batch_size`: prepared, run under nbval, its record checked.
nb: $(STAMP)
	@case " $(SLUGS) " in *" $(NB) "*) ;; *) echo "make nb NB=<notebook>, one of: $(SLUGS)"; exit 2;; esac
	rm -rf $(UNDER_TEST)
	$(BIN)/python tests/prepare_notebooks.py $(UNDER_TEST) notebooks/$(NB).ipynb
	$(NBVAL) $(UNDER_TEST)/$(NB).ipynb "tests/test_notebooks.py::test_notebook_ran_to_its_end_with_the_quick_parameters[$(NB)]" \
		tests/test_notebooks.py::test_the_run_was_quiet_enough_to_decide_the_timing_claims

# The README's map and the instructor guide's tables, written from labkit/manifest.py (a test checks they are current).
docs: $(STAMP)
	$(BIN)/python tools/render_docs.py

browser: $(STAMP)
	@$(TIER) start browser
	$(BIN)/python -m pytest tests -m browser
	@$(TIER) stop browser

report: $(STAMP)
	$(BIN)/python -m labkit report --profile $(PROFILE)

# Every notebook executed (PROFILE=full on a GPU) and rendered as a static site: open build/book/index.html.
# Executed copies in build/book-src are reused while they are newer than their notebook.
book: $(STAMP)
	$(BIN)/python tools/build_book.py --profile $(PROFILE)

doctor: $(STAMP)
	$(BIN)/python -m labkit doctor

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache *.egg-info
