# The two commands at the top of the README: `make demo` and `make test`.
# Both set up .venv first (scripts/setup.sh: idempotent, a no-op when nothing changed).
VENV  := .venv
BIN   := $(VENV)/bin
INDEX := reports/kestrel-index

.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/auditor ingest corpora/kestrel/docs --index $(INDEX)
	$(BIN)/auditor search --index $(INDEX) -k 2 "Is there a restocking fee if I return an opened T9 Pro?"

lint: setup
	$(BIN)/ruff check auditor tests bench
	$(BIN)/ruff format --check auditor tests bench
	$(BIN)/mypy auditor

test: lint
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python bench/ingest.py
