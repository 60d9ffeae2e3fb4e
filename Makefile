# AI Workload Lab. `make lab` to learn, `make test` to check everything, `make report` for CI and instructors.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two environments in one venv: LAB_STAMP the learner's (`pip install .[lab]`: what the notebooks run), STAMP
# everything (`.[lab,test,book]`: the suite's and the book's tool chains too). `make lab` then `make test` only adds.
LAB_STAMP := $(VENV)/.installed-lab
STAMP  := $(VENV)/.installed
# TORCH=cpu: torch and torchvision from PyTorch's CPU-only index (no CUDA libraries; for Linux without an NVIDIA
# GPU, docs/install.md gives the sizes). Unset: PyPI's wheels, the tested path (on Linux they bring CUDA).
TORCH ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
ifneq ($(filter-out cpu,$(TORCH)),)
$(error TORCH=$(TORCH) is not a choice: leave TORCH unset for PyPI's torch, or TORCH=cpu for PyTorch's CPU-only wheels)
endif
# Extra arguments for JupyterLab, e.g. `make lab LAB_ARGS=--no-browser` on a remote machine.
LAB_ARGS ?=
PROFILE ?= quick
# Each target below runs `python -m labkit <command>` (labkit/lab/commands.py), where each command is defined once
# and runs the same without make (Windows: .venv\Scripts\python -m labkit lab). `python -m labkit --dry-run test`
# prints a command's steps. Each tier of `make test` notes its seconds in build/tier-times.json (tools/tier_time.py;
# tools/render_docs.py states them in CONTRIBUTING). `lab` adds --allow-root when run as root, as Jupyter asks.

.PHONY: lab test unit processes notebooks nb browser lint docs report book doctor clean other-python aiperf

# Create the virtual environment on first use, and again whenever the pins change. With TORCH=cpu, torch and
# torchvision come first from the CPU index, without their dependencies (PyPI brings those, pinned, in the next line;
# the pin torch==X accepts X+cpu, and pip keeps what is installed when it satisfies the pins).
$(LAB_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH),$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt --index-url $(TORCH_CPU_INDEX) torch torchvision)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[lab]"
	touch $(LAB_STAMP)

$(STAMP): $(LAB_STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[lab,test,book]"
	touch $(STAMP)

lab: $(LAB_STAMP)
	$(BIN)/python -m labkit lab $(LAB_ARGS)

# The whole suite: lint, unit tests, tests that start processes, every notebook (nbval; papermill injects the quick
# parameters and its exercises are solved after it),
# then notebook `start_here` in JupyterLab in a real Chromium (skipped where Chromium is missing, unless
# LABKIT_REQUIRE_BROWSER=1). No retries: timing claims are decided statistically (labkit.claims) and
# LABKIT_CLAIMS=strict fails a notebook only on a contradicted claim.
test: $(STAMP) lint unit processes notebooks browser

lint: $(STAMP)
	$(BIN)/python -m labkit test lint

unit: $(STAMP)
	$(BIN)/python -m labkit test unit

# Tests that start worker processes, servers, kernels or papermill: slower, so a tier of their own.
processes: $(STAMP)
	$(BIN)/python -m labkit test processes

# Each notebook once, in one kernel: as the learner gets it, then its exercises solved (their checkers asserting), the
# quick parameters injected by papermill (tests/prepare_notebooks.py); nbval runs every cell and compares the checked
# ones; tests/test_notebooks.py then reads what each run recorded. LABKIT_AUDIT_PLOTS=1: every plt.show() fails on an
# axis without a unit or a colour outside the palette.
notebooks: $(STAMP)
	$(BIN)/python -m labkit test notebooks

# One notebook as `make notebooks` runs it, e.g. `make nb NB=batch_size`: prepared, run under nbval, its record checked.
nb: $(STAMP)
	$(BIN)/python -m labkit nb $(NB)

# The README's map and the instructor guide's tables, written from labkit/manifest.py (a test checks they are current).
docs: $(STAMP)
	$(BIN)/python tools/render_docs.py

browser: $(STAMP)
	$(BIN)/python -m labkit test browser

report: $(LAB_STAMP)
	$(BIN)/python -m labkit report --profile $(PROFILE)

# Every notebook executed (PROFILE=full on a GPU) and rendered as a static site: open build/book/index.html.
# Executed copies in build/book-src are reused while they are newer than their notebook.
book: $(STAMP)
	$(BIN)/python -m labkit book --profile $(PROFILE)

doctor: $(LAB_STAMP)
	$(BIN)/python -m labkit doctor

# NVIDIA AIPerf, the benchmark client of notebook `serving_endpoint`, in a virtual environment of its own
# (.venv-aiperf, or $$LABKIT_AIPERF_VENV: it pins its own pandas and numpy): made once, about 1.2 GB and a minute or
# two, then only checked (its stamp file). Without it the notebook says how to make it and the tests skip; CI makes
# it before `make test` and sets LABKIT_REQUIRE_AIPERF=1 so that they run.
aiperf: $(LAB_STAMP)
	$(BIN)/python -m labkit aiperf

# The unit tier and two notebooks on another Python (3.13, or OTHER_PYTHON=3.12), in its own venv under build/, and
# a check that every pin in constraints.txt has wheels for 3.12 and 3.13 on Linux, macOS and Windows. Where that
# Python is missing it prints one line saying so and succeeds. CI runs it after `make test`.
OTHER_PYTHON ?= 3.13
other-python:
	$(PYTHON) tools/other_python.py --version $(OTHER_PYTHON)

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache *.egg-info
