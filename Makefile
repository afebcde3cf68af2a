# The two commands of the README. Both set everything up on a fresh machine first.
SHELL := /bin/bash
export DVC_NO_ANALYTICS := 1
VENV := .venv/bin

.PHONY: repro test test-fast setup sweep extended

repro:  ## set up, get the dataset, reproduce the whole pipeline
	bash scripts/setup.sh --data
	$(VENV)/python -m ncip check-params params.yaml
	PATH="$(CURDIR)/.venv/bin:$$PATH" $(VENV)/dvc repro

# The tests run on every core (pytest-xdist), one thread each: the suite is mostly small
# models and DVC subprocesses, where one process per core beats threads spinning in OpenMP.
TEST_ENV := PATH="$(CURDIR)/.venv/bin:$$PATH" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

test:  ## set up, lint and format check (ruff), run the whole test suite (CPU)
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	$(TEST_ENV) $(VENV)/python -m pytest -q -n auto

test-fast:  ## the suite without the slow end-to-end DVC tests
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	$(TEST_ENV) $(VENV)/python -m pytest -q -n auto -m "not slow"

sweep:  ## sensitivity to alpha and K as queued DVC experiments (after `make repro`)
	bash scripts/setup.sh
	bash scripts/sweep.sh

extended:  ## the extended CPU study (11 independent subjects, Table 5) as one DVC experiment
	bash scripts/setup.sh
	bash scripts/extended.sh
