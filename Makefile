# Two commands for a fresh machine:
#   make run    set up, then run the nightly job (fit-routing) on the embedded default data
#   make test   set up, then run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test setup bench default-data case-studies clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/fit-routing --home .

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python -m bench

schema: setup
	$(BIN)/python -m pipeline.events streams

default-data: setup
	$(BIN)/ratings simulate --preset backlog --seed 7 --out . --truth fits/truth.json --force

clean:
	rm -rf store quarantine deadletter .pytest_cache .hypothesis
