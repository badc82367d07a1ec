#!/usr/bin/env bash
# `make test`: every check a change must pass, phase by phase (set-up, browser, lint, mypy,
# unit tests, end-to-end tests), printing the seconds each phase took and pytest's slowest
# tests, so the landing that slows the suite shows it. Stops at the first failing phase; the
# phases run so far are printed and recorded either way.
#
#   AUDITOR_TEST_TIMES=FILE  where the phase times go as JSON (default reports/test-times.json;
#                            bench/results/test-suite-DATE.json for a kept measurement)
#   PYTEST_ARGS="..."        extra pytest arguments for both pytest phases
#   AUDITOR_TEST_WORKERS=N   pytest-xdist workers for the end-to-end phase (default 2): an engine
#                            start is mostly single-threaded imports in three processes (~60-90 s
#                            on 2 cores), so one test's start overlaps another's work
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
TIMES=${AUDITOR_TEST_TIMES:-reports/test-times.json}
SLOWEST=25
read -r -a extra <<< "${PYTEST_ARGS:-}"
phases=()   # "name seconds status"
started_all=$(date +%s.%N)

report() {
  local total
  total=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
    "$started_all" "$(date +%s.%N)")
  echo
  echo "== make test: seconds per phase =="
  for entry in "${phases[@]}"; do
    read -r name seconds status <<< "$entry"
    printf '%-8s %8s s  %s\n' "$name" "$seconds" "$status"
  done
  printf '%-8s %8s s\n' total "$total"
  mkdir -p "$(dirname "$TIMES")"
  local py=python3
  [ -x "$BIN/python" ] && py=$BIN/python
  "$py" scripts/test_times.py "$TIMES" "$total" "${phases[@]}" || true
}
trap report EXIT

# run_phase NAME COMMAND...: time the command; stop the script with its status if it fails
run_phase() {
  local name=$1 start status seconds
  shift
  echo "== $name: $* ==" >&2
  start=$(date +%s.%N)
  "$@"
  status=$?
  seconds=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
    "$start" "$(date +%s.%N)")
  if [ "$status" -eq 0 ]; then
    phases+=("$name $seconds passed")
  else
    phases+=("$name $seconds failed($status)")
    exit "$status"
  fi
}

lint() {
  "$BIN/ruff" check auditor tests bench scripts pipelines &&
    "$BIN/ruff" format --check auditor tests bench scripts pipelines
}

run_phase setup bash scripts/setup.sh
run_phase browser bash scripts/install-browser.sh
run_phase lint lint
run_phase mypy "$BIN/mypy" auditor
# unit tests: fakes and real files, no engine; then every path on real components
run_phase unit "$BIN/python" -m pytest -m "not e2e" --durations="$SLOWEST" "${extra[@]}"
# tests sharing a session's engines or the Ray cluster run on one worker (xdist_group)
run_phase e2e "$BIN/python" -m pytest -m e2e -n "${AUDITOR_TEST_WORKERS:-2}" --dist loadgroup \
  --durations="$SLOWEST" "${extra[@]}"
