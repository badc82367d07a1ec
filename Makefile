# The two commands at the top of the README: `make demo` and `make test`.
# Both set up .venv first (scripts/setup.sh: idempotent, a no-op when nothing changed).
# AUDITOR_VENV (as scripts/setup.sh reads it) or VENV=DIR builds and uses another environment
VENV  := $(or $(AUDITOR_VENV),.venv)
BIN   := $(VENV)/bin
INDEX := reports/kestrel-index
QUESTIONS := corpora/kestrel/questions.jsonl
DEMO_PIPELINES := qwen-1.5b-cpu qwen-0.5b-cpu

.PHONY: setup browser demo test test-extended lint bench bench-judge

# Under make demo it also notes when set-up started and ended (AUDITOR_MAKE_CLOCK), so that
# the audit's table of where the time went starts with set-up and ingest.
setup:
	@started=$$(date +%s.%N) && AUDITOR_VENV=$(VENV) bash scripts/setup.sh && \
	  ended=$$(date +%s.%N) && \
	  awk -v a="$$started" -v b="$$ended" 'BEGIN { printf "set-up: %.1f s\n", b - a }' >&2 && \
	  if [ -n "$$AUDITOR_MAKE_CLOCK" ]; then mkdir -p "$$(dirname "$$AUDITOR_MAKE_CLOCK")" && \
	    printf 'started %s\nset-up %s\n' "$$started" "$$ended" > "$$AUDITOR_MAKE_CLOCK"; fi

browser:
	@bash scripts/install-browser.sh

# The main job on the embedded default: ingest the bundled corpus, audit two CPU pipelines on
# its first DEMO_LIMIT questions (answer, check every claim, report), write
# reports/demo/report.html with its answers drawn for review (it ends by pointing at the
# review section). Engines run one at a time; re-running resumes. It ends with where the time
# went, set-up and ingest included (also in $(DEMO_OUT)/timings.json).
DEMO_LIMIT := 8
DEMO_OUT := reports/demo
# context precision with reference (another RAGAS call per chunk) is left to full audits to
# keep the demo short (the default judge binds every core: it runs alone after the pipelines)
DEMO_JUDGE := --judge-set 'metrics=["faithfulness", "context_precision", "answer_relevancy"]'
DEMO_GATES := --gate 'error_rate<=0.05' --gate 'unverifiable_rate<=0.05'
# no --calibration: rates as judged. The shipped calibration (RAGTruth news and web answers)
# is not the Kestrel docs' domain; calibrate on labelled Kestrel answers to correct them.
# `python -m auditor`, not the `auditor` script: vLLM's spawned engine processes then skip
# importing the CLI again (multiprocessing's spawn re-runs a script's main module, not -m's)
demo: export AUDITOR_MAKE_CLOCK := $(abspath $(DEMO_OUT)).clock
demo: export AUDITOR_MAKE_STARTED := $(shell date +%s.%N)
demo: setup
	$(BIN)/python -m auditor ingest corpora/kestrel/docs --index $(INDEX)
	$(BIN)/python -m auditor audit $(foreach p,$(DEMO_PIPELINES),--pipeline $(p)) \
	  --questions $(QUESTIONS) --index $(INDEX) --limit $(DEMO_LIMIT) --out $(DEMO_OUT) \
	  $(DEMO_JUDGE) $(DEMO_GATES) --review $(DEMO_LIMIT)

lint: setup
	$(BIN)/ruff check auditor tests bench scripts pipelines
	$(BIN)/ruff format --check auditor tests bench scripts pipelines
	$(BIN)/mypy auditor

# every check, phase by phase with the seconds each took (scripts/test.sh): set-up, browser,
# lint, mypy, unit tests (no engine), end-to-end tests (real engines, FAISS, Ray, Chromium)
test:
	@bash scripts/test.sh

# the end-to-end tests with the variants make test leaves out (every signal on every command
# of the fault suite, Ray's actor restart, run --ray): weekly, or before a release
test-extended: setup
	$(BIN)/python -m pytest -m e2e --run-extended --durations=25

bench: setup
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/run_overhead.py

# How well the default judge decides (bench/judge_quality.py): the verdict cases, the contrast
# floors, the fresh contrast set and RAGTruth QA cross-validated, each PASS or FAIL against
# today's results files. ~2.3 h on 2 cores in float32 (estimated from each part's last
# run); BENCH_JUDGE_PARTS picks parts.
BENCH_JUDGE_PARTS := smoke,floors,fresh,ragtruth
bench-judge: setup
	$(BIN)/python bench/judge_quality.py --parts $(BENCH_JUDGE_PARTS) --out reports/bench-judge \
	  --name judge-quality-$(shell date +%Y-%m-%d)
