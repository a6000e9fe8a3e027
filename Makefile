# Entry points: `make run` (the main job on bundled defaults) and `make test` (every test: what CI runs; about
# 9-10 min on 2 cores, 7-8 min on two workers then 2 min for the Ray tests alone; the aim is under 10 min). While
# editing, `make check` runs the fast tier: the tests that need no server, no process of their own, no Ray cluster
# and no wall-clock pacing (about 1 min on 2 cores); run `make test` before you push. `make durations` re-records
# each test's time (tests/durations.json), which keeps the `slow` markers honest (tests/conftest.py: Tiers). Each
# creates .venv if missing and installs the project with its exact pins.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# the tests `make check` leaves out (pyproject.toml: markers); tests/conftest.py's FAST_TIER is the same
FAST_TIER := not server and not process and not ray and not slow and not solo

.PHONY: run test check durations install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/spottune run

test: $(STAMP)
	@# both phases run; the target fails if either did (the solo tests still report after a parallel failure)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -m 'not solo'; a=$$?; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -m solo; b=$$?; \
	[ $$a -eq 0 ] && [ $$b -eq 0 ]

check: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -m '$(FAST_TIER)'

durations: $(STAMP)
	@# the whole suite as `make test` runs it, each test's seconds merged into tests/durations.json
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -m 'not solo' --record-durations; a=$$?; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -m solo --record-durations; b=$$?; \
	[ $$a -eq 0 ] && [ $$b -eq 0 ]

clean:
	rm -rf $(VENV)
