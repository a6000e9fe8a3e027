# Two entry points: `make run` (the main job on bundled defaults) and `make test`.
# Each creates .venv if missing and installs the project with its exact pins.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test install clean

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

clean:
	rm -rf $(VENV)
