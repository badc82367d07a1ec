"""Goodput of real traffic (pure): the figures of a window of imported traces.

A run of kind "traces" holds the window's population (population.jsonl: every answer of the
window, with the timings its trace recorded) and a uniform sample of it checked
(records.jsonl, checks.jsonl). The figures, each said with what it is over:
- requests per second: the window's traces (imported or skipped) over the window's seconds
  (--since..--until, else first to last trace start);
- latency SLO: the share of the window's answers whose recorded timings meet every set SLO,
  and those answers per second. A census of the window, not a sample: no interval. Answers
  whose trace lacks a timing an SLO needs are not counted as meeting it, and how many lacked
  it is said; when none recorded it, the figure is absent with the reason, never zero;
- quality (the checked sample): the share of answers with a hallucinated claim, with a
  Wilson interval that knows the sample is drawn without replacement from the window's N
  answers (finite-population correction), and the hallucinated-claim rate (bootstrap over
  answers, goodput.summarize);
- quality-SLO goodput: the window's answers per second times the sample's share of answers
  that met the SLO *and* were answered faithfully, its interval that share's (Wilson, finite
  population) scaled alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from auditor.config import SLOConfig
from auditor.errors import BadInput
from auditor.reviewed import labels_only_interval
from auditor.store import read_population as read_population_rows
from auditor.traces.importer import KIND, POPULATION, POPULATION_FIELDS, draw_sample

__all__ = [
    "TIMING_OF_SLO",
    "add_traffic",
    "is_traffic",
    "parse_slo",
    "read_population",
    "traffic_figures",
    "traffic_slo",
]

# the SLO limit -> the timing it reads
TIMING_OF_SLO = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s"}


def traffic_figures(
    manifest: dict[str, Any],
    population: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    checks: Sequence[dict[str, Any]],
    slo: SLOConfig,
) -> dict[str, Any]:
    """summary.json's "traffic" section (see the module doc)."""
    window = manifest.get("window") or {}
    counts = manifest.get("population") or {}
    seconds, span = _window_seconds(window)
    requests = int(counts.get("traces_in_window") or 0)
    answers = len(population)
    per_second = (lambda count: count / seconds) if seconds else (lambda count: None)
    limits = {k: v for k, v in slo.model_dump().items() if v is not None}
    slo_part = _slo(population, limits, per_second)
    unrecorded = sum(row.get("output_tokens") is None for row in population)
    quality = _quality(records, checks, answers, limits, per_second)
    return {
        "window": {**window, "seconds": seconds, "measured_over": span},
        "requests": requests,
        "answers": answers,
        "skipped": counts.get("skipped") or {},
        # the window's tokens: only when every answer's trace recorded its count
        "output_tokens": None
        if unrecorded or not population
        else sum(int(row["output_tokens"]) for row in population),
        "tokens_unrecorded": unrecorded,
        "requests_per_s": per_second(requests),
        "answers_per_s": per_second(answers),
        "slo": limits,
        **slo_part,
        **quality,
    }


def _window_seconds(window: dict[str, Any]) -> tuple[float | None, str]:
    """The window's length and what it was measured from."""
    since, until = window.get("since"), window.get("until")
    if since and until:
        return _seconds_between(since, until), "--since .. --until"
    first, last = window.get("first_start"), window.get("last_start")
    if first and last:
        seconds = _seconds_between(first, last)
        return (seconds or None), "first .. last trace start (no --since/--until)"
    return None, "not known"


def _seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _meets(row: dict[str, Any], limits: dict[str, float]) -> bool | None:
    """Whether a row's timings meet every limit; None when one it needs was not recorded."""
    for limit, bound in limits.items():
        value = row.get(TIMING_OF_SLO[limit])
        if value is None:
            return None
        if value * 1000 > bound:
            return False
    return True


def _slo(
    population: Sequence[dict[str, Any]], limits: dict[str, float], per_second: Any
) -> dict[str, Any]:
    if not limits:
        return {"slo_attainment": None, "slo_rps": None, "slo_absent": "no latency SLO set"}
    verdicts = [_meets(row, limits) for row in population]
    unmeasured = sum(v is None for v in verdicts)
    measured = len(verdicts) - unmeasured
    met = sum(v is True for v in verdicts)
    if measured == 0:
        needed = ", ".join(TIMING_OF_SLO[k] for k in limits)
        return {
            "slo_attainment": None,
            "slo_rps": None,
            "slo_unmeasured": unmeasured,
            "slo_absent": f"no trace of the window recorded {needed} (docs/traces.md: timings)",
        }
    return {
        "slo_attainment": met / measured,
        "slo_rps": per_second(met),
        "slo_met": met,
        "slo_measured": measured,
        "slo_unmeasured": unmeasured,
    }


def _quality(
    records: Sequence[dict[str, Any]],
    checks: Sequence[dict[str, Any]],
    population: int,
    limits: dict[str, float],
    per_second: Any,
) -> dict[str, Any]:
    by_id = {str(row["id"]): row for row in records}
    judged = [c for c in checks if c.get("hallucinated") is not None]
    n = len(judged)
    if n == 0:
        return {
            "checked": 0,
            "hallucinated_answer_rate": None,
            "quality_slo_goodput_rps": None,
            "quality_absent": "the sample is not checked yet (auditor check RUN_DIR)",
        }
    flagged = sum(bool(c["hallucinated"]) for c in judged)
    low, high = labels_only_interval(flagged, n, max(population, n))
    figures: dict[str, Any] = {
        "checked": n,
        "hallucinated_answers": flagged,
        "hallucinated_answer_rate": flagged / n,
        "hallucinated_answer_rate_ci95": [low, high],
    }
    if not limits:
        return figures | {"quality_slo_goodput_rps": None, "quality_absent": "no latency SLO set"}
    verdicts = [(_meets(by_id.get(str(c["id"]), {}), limits), c["hallucinated"]) for c in judged]
    if all(meets is None for meets, _ in verdicts):
        return figures | {
            "quality_slo_goodput_rps": None,
            "quality_absent": "no checked answer's trace recorded the timings the SLO needs",
        }
    good = sum(meets is True and not hallucinated for meets, hallucinated in verdicts)
    share_low, share_high = labels_only_interval(good, n, max(population, n))
    rate = per_second(population)
    return figures | {
        "good_answers": good,
        "good_share": good / n,
        "good_share_ci95": [share_low, share_high],
        "quality_slo_goodput_rps": None if rate is None else rate * good / n,
        "quality_slo_goodput_rps_ci95": None
        if rate is None
        else [rate * share_low, rate * share_high],
    }


def is_traffic(manifest: dict[str, Any]) -> bool:
    """Whether a run dir holds imported traces (a window of real traffic)."""
    return manifest.get("kind") == KIND


def read_population(
    run_dir: Path, manifest: dict[str, Any], records: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """population.jsonl, checked: one row per answer of the window, as many as the manifest
    says, and records.jsonl's answers exactly the sample drawn from it with the manifest's
    size and seed (recomputed here: a records file of another draw would make every rate
    refer to answers nobody drew)."""
    path = run_dir / POPULATION
    fix = "import the traces again into a new --out (auditor traces EXPORT... --out NEW_DIR)"
    if not path.is_file():
        raise BadInput(
            f"{path}: missing (a run of imported traces holds its window's answers); {fix}"
        )
    rows = read_population_rows(run_dir, _population_row)
    counts = manifest.get("population") or {}
    if counts.get("answers") != len(rows):
        raise BadInput(
            f"{path}: {len(rows)} rows, but manifest.json says the window holds "
            f"{counts.get('answers')} answers (population.answers); {fix}"
        )
    sample = manifest.get("sample") or {}
    drawn = draw_sample(
        [str(row["id"]) for row in rows], sample.get("size"), int(sample.get("seed") or 0)
    )
    held = sorted(str(row["id"]) for row in records)
    if manifest.get("status") == "complete" and held != drawn:
        stray = sorted(set(held) - set(drawn)) or sorted(set(drawn) - set(held))
        raise BadInput(
            f"{run_dir / 'records.jsonl'}: its answers are not the sample drawn from "
            f"population.jsonl with seed {sample.get('seed')} and size {sample.get('size')} "
            f"({stray[0]!r} differs); {fix}"
        )
    return rows


def _population_row(where: str, row: Any) -> dict[str, Any]:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        raise BadInput(
            f'{where}: a population row must be an object with "id"; the file was edited?'
        )
    for key in POPULATION_FIELDS[2:]:
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BadInput(f'{where}: "{key}" must be a number or null, not {type(value).__name__}')
    return row


def add_traffic(summary: dict[str, Any], traffic: dict[str, Any]) -> None:
    """The window's figures into a summary: its "traffic" section, and the metrics the main
    table, gates and history read (tok/s of the window's answers, SLO goodput, the answer
    rate of the sample)."""
    summary["traffic"] = traffic
    metrics = summary["metrics"]
    seconds, tokens = traffic["window"]["seconds"], traffic["output_tokens"]
    tps = tokens / seconds if tokens is not None and seconds else None
    weight = metrics["quality_weight"]["value"]
    updates = {
        "tps": (tps, None),
        "goodput_tps": (None if tps is None or weight is None else tps * weight, None),
        "traffic_rps": (traffic["requests_per_s"], None),
        "slo_attainment": (traffic["slo_attainment"], None),
        "slo_goodput_rps": (traffic["slo_rps"], None),
        "quality_slo_goodput_rps": (
            traffic["quality_slo_goodput_rps"],
            traffic.get("quality_slo_goodput_rps_ci95"),
        ),
        "hallucinated_answer_rate": (
            traffic["hallucinated_answer_rate"],
            traffic.get("hallucinated_answer_rate_ci95"),
        ),
    }
    for name, (value, interval) in updates.items():
        metrics[name] = metrics[name] | {"value": value, "ci95": interval}
    if metrics["goodput_tps"]["value"] is not None and metrics["quality_weight"]["ci95"]:
        low, high = metrics["quality_weight"]["ci95"]
        metrics["goodput_tps"]["ci95"] = [tps * low, tps * high]
    summary["throughput_measured"] = tps is not None


def parse_slo(items: Sequence[str]) -> dict[str, float]:
    """`--slo KEY=MS` values (ttft_ms, tpot_ms, e2e_ms) as SLOConfig fields; BadInput naming
    the item and the keys otherwise."""
    given: dict[str, float] = {}
    for item in items:
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or key not in TIMING_OF_SLO:
            raise BadInput(
                f"--slo {item!r}: give KEY=MS with KEY one of {', '.join(TIMING_OF_SLO)}"
            )
        try:
            given[key] = float(value)
        except ValueError as exc:
            raise BadInput(f"--slo {item!r}: {value!r} is not a number of milliseconds") from exc
    try:
        SLOConfig.model_validate(given)
    except ValidationError as exc:
        raise BadInput(f"--slo {', '.join(items)}: each limit must be above 0 ms") from exc
    return given


def traffic_slo(manifest: dict[str, Any], run_dir: Path | None = None) -> SLOConfig:
    """The latency SLO a run of imported traces was given (`auditor traces --slo`)."""
    try:
        return SLOConfig.model_validate(manifest.get("slo") or {})
    except ValidationError as exc:
        where = run_dir / "manifest.json" if run_dir is not None else "manifest.json"
        raise BadInput(
            f'{where}: "slo" must hold ttft_ms, tpot_ms or e2e_ms above 0; {exc.errors()[0]["msg"]}'
        ) from exc
