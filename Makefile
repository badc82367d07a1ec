# The two commands at the top of the README: `make demo` and `make test`.
# Both set up .venv first (scripts/setup.sh: idempotent, a no-op when nothing changed).
VENV  := .venv
BIN   := $(VENV)/bin
INDEX := reports/kestrel-index
QUESTIONS := corpora/kestrel/questions.jsonl
DEMO_PIPELINES := qwen-1.5b-cpu qwen-0.5b-cpu

.PHONY: setup browser demo test lint bench

setup:
	@bash scripts/setup.sh

browser:
	@bash scripts/install-browser.sh

# Ingest the bundled corpus, then answer its questions with each CPU pipeline (one engine
# at a time). Re-running resumes: finished runs are not redone.
demo: setup
	$(BIN)/auditor ingest corpora/kestrel/docs --index $(INDEX)
	@for p in $(DEMO_PIPELINES); do \
	  $(BIN)/auditor run --pipeline $$p --questions $(QUESTIONS) --index $(INDEX) --out reports/demo/$$p || exit $$?; \
	done

lint: setup
	$(BIN)/ruff check auditor tests bench
	$(BIN)/ruff format --check auditor tests bench
	$(BIN)/mypy auditor

test: lint browser
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/run_overhead.py
