# jaxrl_suite: the two quick-start commands and a few helpers.
#   make reproduce   set up .venv, run every reproduction in quick mode, write workdirs/results_quick/
#                    (results/ holds the committed full-mode results; `make reproduce-full` writes it)
#   make test        set up .venv with test extras, run the test suite (lint and wheel install too);
#                    its last lines give the suite's CPU time beside its wall time (budget: 15 min
#                    wall on 2 cores from a fresh clone; the heaviest tests run in `make test-slow`)
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.jax_cache
export PYTHONHASHSEED := 0

.PHONY: reproduce reproduce-full test test-slow lint wheel bench sweep summary notebooks venv clean

$(VENV)/.installed: setup.cfg pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (set PYTHON=python3 to use another)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

reproduce: venv
	$(PY) -m experiments.reproduce --quick

reproduce-full: venv
	$(PY) -m experiments.reproduce

test: venv
	$(PY) -m pytest -q -n 2 --dist worksteal --durations=25 tests

test-slow: venv
	$(PY) -m pytest -q -m slow tests

lint: venv
	$(VENV)/bin/ruff check .

# A wheel as users get it (package data included); tests/user_path/test_user_path_wheel.py installs
# one into a fresh venv and makes every environment from outside the checkout.
wheel: venv
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w build/wheels .

bench: venv
	$(PY) -m experiments.bench_ppo

sweep: venv
	$(PY) -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py:quick

summary: venv
	$(PY) -m experiments.reproduce --summary_only --readme

notebooks: venv
	$(PY) colabs/build_notebooks.py

clean:
	rm -rf $(VENV) .jax_cache workdirs .pytest_cache build
