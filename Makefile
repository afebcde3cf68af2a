# The two commands of the README. Both set everything up on a fresh machine first.
SHELL := /bin/bash
export DVC_NO_ANALYTICS := 1
VENV := .venv/bin

.PHONY: repro test test-fast setup sweep extended epochs text lm docs

repro:  ## set up, get the dataset, reproduce the whole pipeline
	bash scripts/setup.sh --data
	$(VENV)/python -m ncip check-params params.yaml
	$(VENV)/python scripts/prune_lock.py
	PATH="$(CURDIR)/.venv/bin:$$PATH" $(VENV)/dvc repro

# The tests run on every core (pytest-xdist), one thread each: the suite is mostly small
# models and DVC subprocesses, where one process per core beats threads spinning in OpenMP.
# --dist loadscope keeps each module on one worker, so a module-scoped fixture (a DVC project
# reproduced end to end, a trained model) is built once, not once per worker;
# --no-loadscope-reorder keeps the collection order, where tests/conftest.py puts the slow
# end-to-end modules first (xdist would otherwise start the modules with most tests first,
# leaving the few long ones to run alone at the end). The slowest tests are listed at the end.
TEST_ENV := PATH="$(CURDIR)/.venv/bin:$$PATH" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

test:  ## set up, lint and format check (ruff), run the whole test suite (CPU)
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	$(TEST_ENV) $(VENV)/python -m pytest -q -n auto --dist loadscope --no-loadscope-reorder --durations=25

test-fast:  ## the suite without the slow end-to-end DVC tests
	bash scripts/setup.sh
	$(VENV)/ruff check . && $(VENV)/ruff format --check .
	$(TEST_ENV) $(VENV)/python -m pytest -q -n auto --dist loadscope --no-loadscope-reorder -m "not slow"

sweep:  ## sensitivity to alpha and K as queued DVC experiments (after `make repro`)
	bash scripts/setup.sh
	bash scripts/sweep.sh

extended:  ## the extended CPU study (36 data sets from 34 sources, the two pre-registered questions, the chooser) as one DVC experiment
	bash scripts/setup.sh
	bash scripts/experiment.sh extended

epochs:  ## three subjects at 60 and 200 epochs, 3 runs each (longer training) as one DVC experiment
	bash scripts/setup.sh
	bash scripts/experiment.sh epochs

text:  ## the text study (WordNet glosses, fortunes; TextCNN and Transformer) as one DVC experiment
	bash scripts/setup.sh
	bash scripts/experiment.sh text

lm:  ## the language-model study (GPT-2 from a config, Python docs; paper Fig. 4b; RAUC and PRR, per-prompt data) as one DVC experiment
	bash scripts/setup.sh
	bash scripts/experiment.sh lm

docs:  ## re-render the parts of docs/ that are facts of the data or of committed runs
	bash scripts/setup.sh
	$(VENV)/python scripts/render_docs.py
