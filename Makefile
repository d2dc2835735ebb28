# The project's gates (see CONTRIBUTING.md).
#
#   make check   ruff check, ruff format --check, mypy, the fast tests (no Slurm cluster, no
#                TensorFlow: a few minutes) and the SPANK plugin's checks (plugin/Makefile)
#   make test    the whole test suite, as README.md runs it (starts throwaway Slurm clusters)
#
# Variables: PYTHON (default .venv/bin/python, the environment install.sh creates; ruff,
# mypy and pytest run as its modules).

PYTHON ?= .venv/bin/python

.PHONY: check lint format-check typecheck fast-tests plugin-check test

check: lint format-check typecheck fast-tests plugin-check

lint:
	$(PYTHON) -m ruff check .

format-check:
	$(PYTHON) -m ruff format --check .

typecheck:
	$(PYTHON) -m mypy

# tests/test_lint.py runs ruff and mypy as tests too; check runs them above, once.
fast-tests:
	$(PYTHON) -m pytest -q -m "not cluster and not tf" -k "not test_ruff and not test_mypy"

plugin-check:
	$(MAKE) -C plugin check

test:
	$(PYTHON) -m pytest
