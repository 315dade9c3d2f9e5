# Every target installs what it needs into .venv first (python3 >= 3.10 is the only prerequisite).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OUT    ?= out/demo

.PHONY: install demo test test-fast test-e2e test-tfx-files test-all lint bench image-test docs docs-serve clean

# --compile-bytecode: the .pyc files of what is installed, written once here. Without them, where
# PYTHONDONTWRITEBYTECODE is set (CI) every process that imports TensorFlow, Keras, TFMA or Beam
# compiles their Python again: about 7 of the 12 CPU seconds of `import tensorflow`, and the tests
# start hundreds of such processes.
$(STAMP): pyproject.toml requirements/dev.lock requirements/no-deps.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade "uv>=0.4"
	$(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode -r requirements/dev.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode --no-deps -r requirements/no-deps.txt
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/penguin/demo.py --out $(OUT)

# Every test, on every core (pytest-xdist), the end-to-end runs (marked e2e: whole pipelines, kills and
# restarts) included; CI runs this on 2 cores well under 30 minutes. --dist worksteal: a worker that runs
# out of tests takes half of another's queue, so both stay busy to the end (tests/conftest.py puts the
# longest first); the 25 slowest tests are listed at the end. `make test-e2e` runs only the e2e tests;
# `make test-tfx-files` only TFX's own pipeline files run unedited end to end (marked tfx_files).
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -ra -n auto --dist worksteal --durations=25 $(PYTEST_ARGS)

test-tfx-files: $(STAMP)
	$(PY) -m pytest -q -ra -n auto --dist worksteal -m tfx_files $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(PY) -m pytest -q -ra -n auto --dist worksteal -m e2e $(PYTEST_ARGS)

test-all: test

# Everything but the tests that train or start the CLI in TensorFlow (marked slow): a quick check while editing.
test-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -ra -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) bench/run_all.py

# The manual (docs/, mkdocs): the reference pages regenerated from the declarations, then the site in out/site.
docs: $(STAMP)
	$(PY) docs/gen_reference.py
	$(VENV)/bin/mkdocs build --strict

docs-serve: docs
	$(VENV)/bin/mkdocs serve

# The image test needs the dev venv too (kfp and the docker client, for the pipeline step): PY is its python.
image-test: $(STAMP)
	PY=$(abspath $(PY)) bash images/trainer/smoke.sh

clean:
	rm -rf $(VENV) out .pytest_cache
