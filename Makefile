# Two commands do all set-up on a fresh machine:
#   make demo   runs the main job
#   make test   runs lint, the import contracts and the test suite (what CI runs)
# Each creates or updates its own virtual environment in .venv.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.stamp-run
STAMP_DEV := $(VENV)/.stamp-dev
# Debian packages the tests need: chromium for the browser tests (tests/web/test_web.py),
# postgresql for the arena's storage against a real server (tests/arena/conftest.py).
APT_TEST_PACKAGES := chromium postgresql

.PHONY: demo test test-slow lint bench compose-check clean

# pip's output goes to a log, shown only when it fails: `make demo` prints one line per step.
PIP_LOG := $(VENV)/pip.log
QUIET = > $(PIP_LOG) 2>&1 || { cat $(PIP_LOG); echo "failed; its output is above (and in $(PIP_LOG))"; exit 1; }

$(VENV)/bin/python:
	@echo "creating $(VENV) ..."
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --upgrade pip $(QUIET)

$(STAMP_RUN): pyproject.toml constraints.txt | $(VENV)/bin/python
	@echo "installing rtplan and its dependencies into $(VENV) (a few minutes the first time) ..."
	@$(PY) -m pip install -c constraints.txt -e . $(QUIET)
	@touch $@

$(STAMP_DEV): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	@if [ -n "$(APT_TEST_PACKAGES)" ]; then \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $(APT_TEST_PACKAGES); \
	fi
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(VENV)/bin/rtplan demo

# `--dist loadfile`: each test file runs whole on one worker, so its module fixtures (servers,
# checkpoints) start once and its tests share that process's compiled executables.
test: $(STAMP_DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	@start=$$(date +%s); $(PY) -m pytest -n 2 --dist loadfile; rc=$$?; \
		echo "pytest wall time: $$(( $$(date +%s) - start )) s"; exit $$rc

# The long tests kept out of the default suite (`-m slow`); run before an issue is resolved.
test-slow: $(STAMP_DEV)
	@start=$$(date +%s); $(PY) -m pytest -n 2 --dist loadfile -m slow; rc=$$?; \
		echo "pytest wall time: $$(( $$(date +%s) - start )) s"; exit $$rc

bench: $(STAMP_RUN)
	$(PY) -m bench.bench_games
	$(PY) -m bench.bench_planner

# docker-compose.yml's cpu profile run for real in Docker (needs a Docker engine and a compose;
# deploy/compose_check.sh says what it checks); not part of `make test`.
compose-check: $(STAMP_RUN)
	PYTHON=$(PY) bash deploy/compose_check.sh

clean:
	rm -rf $(VENV)
