# Two commands for a fresh machine:
#   make run    set up, then run the nightly job (fit-routing) on the embedded default data:
#               publishes fits/routing-table.json and writes case-studies/routing-by-rating/
#   make test   set up, then check lint, format and types (ruff, mypy) and run the whole test suite
# Real-data case studies (committed): make case-studies (the three targets below).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test setup bench schema default-data case-studies case-study-routerbench case-study-livecodebench \
	case-study-terminal-bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,spark]'
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/fit-routing --home . --credit "Data: the embedded default backlog (streams/), simulated with known truth by make default-data (ratings simulate --preset backlog --seed 7); the truth, in fits/truth.json, is never read by the fit."

# Lint, format and types first (each fails the target), then the whole suite.
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2

bench: setup
	$(BIN)/python -m bench

schema: setup
	$(BIN)/python -m pipeline.streams.events .
	$(BIN)/python -m pipeline.nightly.stats .

default-data: setup
	$(BIN)/ratings simulate --preset backlog --seed 7 --out . --truth fits/truth.json --force

# A real-data case study: import the table into a scratch home (wiped first), backtest it (the default policy and
# ladder, from the cheapest and the frontier start, the seeds given below), fit it with the backtest attached, and
# copy the rendered page into case-studies/NAME/. One command each: make case-study-routerbench, ...-livecodebench,
# ...-terminal-bench. BACKTEST_JOBS processes run the backtest's loops (the same bytes for any number).
# LiveCodeBench's backtest runs 5 seeds (LCB_SEEDS): its refits (16 configs) made 20 seeds take hours on the
# shared 2-core machine; make case-study-livecodebench LCB_SEEDS=20 runs the full 20.
BACKTEST_JOBS ?= 2
LCB_SEEDS ?= 5
define real_case_study
	rm -rf build/$(1) build/$(1)-backtest case-studies/$(1)
	$(BIN)/ratings import data/$(2) --home build/$(1) --rater-name $(1)
	$(BIN)/ratings backtest data/$(2) --out build/$(1)-backtest --policy learning_governed --policy ladder \
	  --start cheapest --start frontier --seeds $(3) --jobs $(BACKTEST_JOBS) --quiet > /dev/null
	$(BIN)/fit-routing --home build/$(1) --case-study $(1) --quiet --backtest build/$(1)-backtest/backtest.json \
	  --credit "Reproduce: make case-study-$(1) (imports data/$(2) into the scratch home build/$(1), backtests it, fits it, copies the page here); the table is described in data/README.md."
	mkdir -p case-studies && cp -r build/$(1)/case-studies/$(1) case-studies/$(1)
endef

case-studies: case-study-routerbench case-study-livecodebench case-study-terminal-bench

case-study-routerbench: setup
	$(call real_case_study,routerbench,routerbench-zero-shot.csv.gz,20)

case-study-livecodebench: setup
	$(call real_case_study,livecodebench,livecodebench.csv.gz,$(LCB_SEEDS))

case-study-terminal-bench: setup
	$(call real_case_study,terminal-bench,terminal-bench.csv.gz,20)

clean:
	rm -rf store quarantine deadletter .pytest_cache .hypothesis
