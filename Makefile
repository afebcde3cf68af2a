# The two commands of the README. Both set everything up on a fresh machine first.
SHELL := /bin/bash
export DVC_NO_ANALYTICS := 1
VENV := .venv/bin

.PHONY: repro test test-fast setup sweep

repro:  ## set up, get the dataset, reproduce the whole pipeline
	bash scripts/setup.sh --data
	$(VENV)/python -m ncip check-params params.yaml
	PATH="$(CURDIR)/.venv/bin:$$PATH" $(VENV)/dvc repro

test:  ## set up, lint and format check (ruff), run the whole test suite (CPU)
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	PATH="$(CURDIR)/.venv/bin:$$PATH" $(VENV)/python -m pytest -q

test-fast:  ## the suite without the slow end-to-end DVC tests
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	PATH="$(CURDIR)/.venv/bin:$$PATH" $(VENV)/python -m pytest -q -m "not slow"

sweep:  ## sensitivity to alpha and K as queued DVC experiments (after `make repro`)
	bash scripts/setup.sh
	bash scripts/sweep.sh
