# pldemu: the two commands a newcomer needs are `make demo` and `make test`.
# Everything installs into ./.venv from PyPI (MPICH included: no root, no apt).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint install bytecode clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[mpich,test,dev,plot]'
	touch $(STAMP)

# Byte-compile pldemu once: every rank of every job imports it, and where PYTHONDONTWRITEBYTECODE is
# set (or the tree is read-only) Python would otherwise compile every module from source in every
# process, 0.25 s per rank (docs/benchmarks.md, start-up). Fresh .pyc files are reused; stale ones recompiled.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q pldemu

install: $(STAMP) bytecode

## Install, then run the 4-rank demonstration (allreduce + all_to_all_v in a loop, lowered, run, checked).
demo: $(STAMP) bytecode
	$(BIN)/pldemu demo -n 4

## Install, then run every test (single-process and multi-rank; mpiexec is launched by the tests).
test: $(STAMP) bytecode
	$(BIN)/python -m pytest

## ruff + mypy, both configured in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check pldemu tests scripts
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
