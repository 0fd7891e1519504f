# Two commands for a fresh machine with only Python 3.11+:
#   make demo   - the whole product end to end on the embedded default (SQLite, in-process tasks)
#   make test   - the whole test suite (starts PostgreSQL/Redis if installed but down)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test reliability up down install install-test bench-quick lint clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fptrack needs Python 3.11 or newer (found %s)" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,bench,deploy]'
	@touch $(VENV)/.installed $(VENV)/.installed-deploy $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(VENV)/bin/fptrack demo

test: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	$(PY) -m pytest $(PYTEST_ARGS)

# the fault-injection and fuzzing tests alone, with their reports (they also run in `make test`)
reliability: $(VENV)/.installed-test
	bash deploy/ensure-services.sh
	$(PY) -m pytest tests/reliability -s $(PYTEST_ARGS)

# the whole process set on this machine (deploy/Procfile under honcho; settings from deploy/.env): deploy/README.md
$(VENV)/.installed-deploy: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[deploy]'
	@touch $(VENV)/.installed $@

up: $(VENV)/.installed-deploy
	$(PY) deploy/process_set.py up

down:
	$(PYTHON) deploy/process_set.py down

bench-quick: $(VENV)/.installed-test
	@for b in benchmarks/[!_]*.py; do echo "== $$b"; $(PY) $$b --quick || exit 1; done

lint: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m mypy --strict fingerprint compare storage crawler

clean:
	rm -rf $(VENV) fptrack-data .pytest_cache .hypothesis
