# Two commands for a fresh machine with only Python 3.11+:
#   make demo   - the whole product end to end on the embedded default (SQLite, in-process tasks)
#   make test   - the whole test suite (starts PostgreSQL/Redis if installed but down)
# and for a developer's inner loop: make test-quick (a few minutes, below), make lint (ruff and mypy).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-quick reliability up down install install-test lock bench-quick lint clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fptrack needs Python 3.11 or newer (found %s)" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Every version comes from a lock file (requirements/runtime.txt for the product, requirements/dev.txt with the
# test, bench, deploy and dev extras, both with hashes); the package is then installed editable over them.
LOCK := requirements/runtime.txt
LOCK_DEV := requirements/dev.txt

# PYTHONWARNINGS=ignore: setuptools warns about every editable install (a screen of asterisks) in the
# build backend's own process, which inherits the variable
$(VENV)/.installed: pyproject.toml setup.py $(LOCK) | $(PY)
	$(PY) -m pip install --quiet -r $(LOCK)
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --no-deps -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml setup.py $(LOCK_DEV) | $(PY)
	$(PY) -m pip install --quiet -r $(LOCK_DEV)
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --no-deps -e .
	@touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# the lock files written again from pyproject.toml's dependencies by uv (in the dev extra), keeping the versions
# they pin; `make lock LOCK_ARGS="--upgrade-package scrapy"` moves one, LOCK_ARGS=--upgrade all
lock: $(VENV)/.installed-test
	$(PY) -m uv pip compile --quiet --python $(PY) --generate-hashes --custom-compile-command 'make lock' \
		$(LOCK_ARGS) pyproject.toml -o $(LOCK)
	$(PY) -m uv pip compile --quiet --python $(PY) --generate-hashes --custom-compile-command 'make lock' \
		$(LOCK_ARGS) pyproject.toml --all-extras -c $(LOCK) -o $(LOCK_DEV)

demo: $(VENV)/.installed
	$(VENV)/bin/fptrack demo

# the whole suite; --durations=30 ends each run with its 30 slowest tests (set-up and teardown included), so
# that a test that grew slow shows itself. To rank one folder: make test PYTEST_ARGS="tests/e2e --durations=40".
# A test that waits on a period (a polite pace, a re-check or confirmation delay, a schedule) sets the setting
# that shortens it in the test, unless the test proves that default (tests/e2e/test_removal_with_defaults.py).
test: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	$(PY) -m pytest --durations=30 $(PYTEST_ARGS)

# the inner loop: the unit and integration tests but the slow ones (crawls in child processes, workers), the
# browser's and PostgreSQL's (a test on both backends runs on SQLite: PostgreSQL's half was 40 % of the time)
# and the command line's (tests/integration/cli: most of its 61 quick tests run fptrack in child processes,
# about 1.8 s to start, 4 min 30 s in all), plus the architecture and packaging checks; no end-to-end,
# reliability or lint (`make lint`). Same services as `make test`. 686 tests in 2 min 50 s on this machine
# (2 cores), against about 33 minutes for `make test`. `make test-quick PYTEST_ARGS=tests/integration/cli`
# brings the command line's tests back (an explicit path beats --ignore).
QUICK_TESTS := tests/unit tests/integration tests/test_architecture.py tests/test_packaging.py \
	--ignore=tests/integration/cli
QUICK_MARKERS := not slow and not reliability and not browser and not postgres
test-quick: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	$(PY) -m pytest $(QUICK_TESTS) -m "$(QUICK_MARKERS)" --durations=10 $(PYTEST_ARGS)

# the fault-injection and fuzzing tests alone, with their reports (they also run in `make test`)
reliability: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	$(PY) -m pytest tests/reliability -s $(PYTEST_ARGS)

# the whole process set on this machine (deploy/Procfile under honcho, from the deploy extra; settings from
# deploy/.env): deploy/README.md
up: $(VENV)/.installed-test
	$(PY) deploy/process_set.py up

down:
	$(PYTHON) deploy/process_set.py down

# every benchmark's smoke run (python -m benchmarks.<group>.<name> --quick: seconds to a minute or two each, a
# skip line where a service or the corpus is missing); tests/integration/benchmarks/test_quick.py runs the same
BENCHMARKS = $(sort $(subst /,.,$(basename $(wildcard benchmarks/*/[!_]*.py))))
bench-quick: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	@for b in $(BENCHMARKS); do echo "== $$b"; $(PY) -m $$b --quick || exit 1; done

# what tests/test_static_checks.py checks, configured in pyproject.toml: lint and format over the whole tree,
# strict types over the package fptrack, the process-set script and the benchmarks, and the dependency check
# (deptry: what the product imports is declared, what is declared is imported)
lint: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m mypy deploy/process_set.py
	$(PY) -m mypy -p benchmarks
	$(PY) -m deptry .

clean:
	rm -rf $(VENV) fptrack-data .pytest_cache .hypothesis
