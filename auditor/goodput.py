"""Goodput and its confidence intervals (pure): summary.json from a run's artifacts.

Definitions (the report states them in words, `auditor/report/templates/report.html.j2`):
- tps = output tokens / generation wall seconds (all sessions), with its load regime;
- h = (unsupported + contradicted claims) / judged claims; unverifiable claims are counted
  apart and never judged; w = (1-h)^a * relevancy^b * completion^c (exponents in the config);
- goodput = tps * w; good tokens = per answer, output tokens x its share of supported claims;
- SLO goodput = requests meeting every set latency SLO / generation seconds; quality SLO
  goodput counts only those that are also fully faithful (no unsupported or contradicted claim).
Every figure that is a statistic over requests gets a percentile-bootstrap 95 % interval:
requests are resampled with their claims (claims of one answer are not independent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditor.calibration import JudgeAccuracy, rogan_gladen
from auditor.config import ALL_JUDGE_METRICS, GoodputConfig, SLOConfig

__all__ = ["METRICS", "REVIEWED", "RequestRow", "request_rows", "sample_figures", "summarize"]

SUMMARY_SCHEMA_VERSION = 1

# name -> (unit, higher is better); the names are what gates and history use
METRICS: dict[str, tuple[str, bool]] = {
    "tps": ("tok/s", True),
    "goodput_tps": ("tok/s", True),
    "quality_weight": ("", True),
    "hallucination_rate": ("", False),
    "faithfulness": ("", True),
    "context_precision": ("", True),
    "context_precision_with_reference": ("", True),
    "answer_relevancy": ("", True),
    "context_recall": ("", True),
    "answer_correctness": ("", True),
    "good_tokens": ("tokens", True),
    "ttft_p50_ms": ("ms", False),
    "ttft_p95_ms": ("ms", False),
    "ttft_p99_ms": ("ms", False),
    "tpot_p50_ms": ("ms", False),
    "tpot_p95_ms": ("ms", False),
    "e2e_p50_ms": ("ms", False),
    "e2e_p95_ms": ("ms", False),
    "slo_attainment": ("", True),
    "slo_goodput_rps": ("req/s", True),
    "quality_slo_goodput_rps": ("req/s", True),
    "completion": ("", True),
    # imported traces (auditor.traffic): the window's requests per second, and the share of
    # the checked sample's answers with a hallucinated claim (finite-population interval)
    "traffic_rps": ("req/s", True),
    "hallucinated_answer_rate": ("", False),
    "error_rate": ("", False),
    "unverifiable_rate": ("", False),
    # with a calibration (auditor calibrate): the same, corrected for the judge's own error
    "hallucination_rate_corrected": ("", False),
    "quality_weight_corrected": ("", True),
    "goodput_tps_corrected": ("tok/s", True),
    # with people's labels on a random sample (report --labels): the rate is theirs
    "reviewed_hallucination_rate": ("", False),
    "goodput_tps_reviewed": ("tok/s", True),
}
REVIEWED = ("reviewed_hallucination_rate", "goodput_tps_reviewed")
CORRECTED = ("hallucination_rate_corrected", "quality_weight_corrected", "goodput_tps_corrected")


@dataclass(frozen=True)
class RequestRow:
    """What the goodput arithmetic needs of one request: its record joined with its check."""

    ok: bool
    complete: bool  # answered in full: no error, not cut at max_tokens, not empty
    output_tokens: int
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    supported: int = 0
    hallucinated: int = 0  # unsupported + contradicted claims
    unverifiable: int = 0
    faithful: bool = False  # judged and free of unsupported/contradicted claims (refusals too)
    faithfulness: float | None = None
    context_precision: float | None = None
    context_precision_with_reference: float | None = None
    answer_relevancy: float | None = None
    context_recall: float | None = None
    answer_correctness: float | None = None


# per-answer scores of checks.jsonl, averaged over answers (the judge metrics' names)
ANSWER_SCORES = ALL_JUDGE_METRICS


def request_rows(
    records: Sequence[dict[str, Any]], checks: Sequence[dict[str, Any]]
) -> list[RequestRow]:
    """Records joined with their checks by id (a request never checked has no quality)."""
    by_id = {row["id"]: row for row in checks}
    rows = []
    for record in records:
        check = by_id.get(record["id"])
        ok = not record.get("error")
        answer = (record.get("answer") or "").strip()
        base: dict[str, Any] = {
            "ok": ok,
            "complete": ok and bool(answer) and record.get("finish_reason") != "length",
            "output_tokens": int(record.get("output_tokens") or 0) if ok else 0,
            "ttft_s": record.get("ttft_s") if ok else None,
            "tpot_s": record.get("tpot_s") if ok else None,
            "e2e_s": record.get("e2e_s") if ok else None,
        }
        if check is not None:
            counts = check.get("claim_counts", {})
            base |= {
                "supported": counts.get("supported", 0),
                "hallucinated": counts.get("unsupported", 0) + counts.get("contradicted", 0),
                "unverifiable": counts.get("unverifiable", 0),
                "faithful": check.get("hallucinated") is False,
                **{str(name): check.get(name) for name in ANSWER_SCORES},
            }
        rows.append(RequestRow(**base))
    return rows


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _percentile_ms(values: list[float | None], q: float) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.percentile(present, q)) * 1000 if present else None


def _meets_slo(row: RequestRow, slo: SLOConfig) -> bool:
    if not row.ok:
        return False
    for limit_ms, value in (
        (slo.ttft_ms, row.ttft_s),
        (slo.tpot_ms, row.tpot_s),
        (slo.e2e_ms, row.e2e_s),
    ):
        if limit_ms is not None and (value is None or value * 1000 > limit_ms):
            return False
    return True


def sample_figures(
    rows: Sequence[RequestRow],
    tps: float | None,
    generation_s: float | None,
    slo: SLOConfig,
    weights: GoodputConfig,
) -> dict[str, float | None]:
    """Every figure of one sample of requests (the full run, or one bootstrap resample)."""
    judged = sum(r.supported + r.hallucinated for r in rows)
    h = sum(r.hallucinated for r in rows) / judged if judged else None
    claims = judged + sum(r.unverifiable for r in rows)
    relevancy = _mean([r.answer_relevancy for r in rows])
    completion = sum(r.complete for r in rows) / len(rows) if rows else None
    weight: float | None = None
    if h is not None:
        weight = (1 - h) ** weights.hallucination
        for value, exponent in ((relevancy, weights.relevancy), (completion, weights.completion)):
            if exponent:
                weight = None if value is None or weight is None else weight * value**exponent
    measured = generation_s is not None and generation_s > 0
    meets = [_meets_slo(r, slo) for r in rows]
    good = [
        r.output_tokens * r.supported / (r.supported + r.hallucinated)
        for r in rows
        if r.supported + r.hallucinated
    ]
    return {
        "tps": tps,
        "goodput_tps": tps * weight if tps is not None and weight is not None else None,
        "quality_weight": weight,
        "hallucination_rate": h,
        "faithfulness": _mean([r.faithfulness for r in rows]),
        "context_precision": _mean([r.context_precision for r in rows]),
        "context_precision_with_reference": _mean(
            [r.context_precision_with_reference for r in rows]
        ),
        "answer_relevancy": relevancy,
        "context_recall": _mean([r.context_recall for r in rows]),
        "answer_correctness": _mean([r.answer_correctness for r in rows]),
        "good_tokens": float(sum(good)) if good else None,
        "ttft_p50_ms": _percentile_ms([r.ttft_s for r in rows], 50),
        "ttft_p95_ms": _percentile_ms([r.ttft_s for r in rows], 95),
        "ttft_p99_ms": _percentile_ms([r.ttft_s for r in rows], 99),
        "tpot_p50_ms": _percentile_ms([r.tpot_s for r in rows], 50),
        "tpot_p95_ms": _percentile_ms([r.tpot_s for r in rows], 95),
        "e2e_p50_ms": _percentile_ms([r.e2e_s for r in rows], 50),
        "e2e_p95_ms": _percentile_ms([r.e2e_s for r in rows], 95),
        "slo_attainment": sum(meets) / len(rows) if rows and measured else None,
        "slo_goodput_rps": sum(meets) / generation_s if rows and measured else None,  # type: ignore[operator]
        "quality_slo_goodput_rps": (
            sum(m and r.faithful for m, r in zip(meets, rows, strict=True)) / generation_s  # type: ignore[operator]
            if rows and measured
            else None
        ),
        "completion": completion,
        "error_rate": sum(not r.ok for r in rows) / len(rows) if rows else None,
        "unverifiable_rate": sum(r.unverifiable for r in rows) / claims if claims else None,
    }


# figures that are not statistics over requests: measured once for the whole run
_NO_INTERVAL = {"tps"}


def bootstrap_intervals(
    rows: Sequence[RequestRow],
    figures: Callable[[Sequence[RequestRow]], dict[str, float | None]],
    *,
    rounds: int = 1000,
    seed: int = 0,
) -> dict[str, tuple[float, float] | None]:
    """Percentile-bootstrap 95 % interval of each figure, resampling requests with replacement."""
    if not rows:
        return {}
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        picked = rng.integers(0, len(rows), len(rows))
        for name, value in figures([rows[i] for i in picked]).items():
            if value is not None:
                samples.setdefault(name, []).append(value)
    intervals: dict[str, tuple[float, float] | None] = {}
    for name, values in samples.items():
        low, high = np.percentile(values, [2.5, 97.5])
        intervals[name] = (float(low), float(high))
    return intervals


def _corrected(
    figures: dict[str, float | None],
    sensitivity: float,
    specificity: float,
    weights: GoodputConfig,
) -> dict[str, float | None]:
    """The hallucination rate, quality weight and goodput with the claim rate corrected for
    the judge's error (Rogan-Gladen); None where the correction is undefined."""

    judged = figures["hallucination_rate"]
    weight = figures["quality_weight"]
    h = None if judged is None else rogan_gladen(judged, sensitivity, specificity)
    corrected_weight = None
    if h is not None and weight is not None and judged is not None:
        # the weight's other factors (relevancy, completion) are not the judge's claim rate
        others = weight / (1 - judged) ** weights.hallucination if judged < 1 else None
        if others is not None:
            corrected_weight = (1 - h) ** weights.hallucination * others
        elif not weights.relevancy and not weights.completion:
            corrected_weight = (1 - h) ** weights.hallucination
    tps = figures["tps"]
    return {
        "hallucination_rate_corrected": h,
        "quality_weight_corrected": corrected_weight,
        "goodput_tps_corrected": tps * corrected_weight
        if tps is not None and corrected_weight is not None
        else None,
    }


def summarize(
    manifest: dict[str, Any],
    records: Sequence[dict[str, Any]],
    checks: Sequence[dict[str, Any]],
    slo: SLOConfig,
    weights: GoodputConfig,
    *,
    rounds: int = 1000,
    seed: int = 0,
    calibration: JudgeAccuracy | None = None,
) -> dict[str, Any]:
    """summary.json for a run dir: every figure with its 95 % interval where it is a statistic.

    With a `calibration` (the judge's claim-level accuracy on labelled answers), the corrected
    figures join them; their intervals resample the requests and, in the same rounds, draw the
    judge's sensitivity and specificity from the calibration's binomials, so they carry both
    uncertainties.
    """
    rows = request_rows(records, checks)
    measured = manifest.get("kind", "run") == "run"
    generation_s = (
        sum(float(s.get("generation_s") or 0.0) for s in manifest.get("sessions", []))
        if measured
        else None
    )
    output_tokens = sum(r.output_tokens for r in rows)
    tps = output_tokens / generation_s if generation_s else None

    def figures(sample: Sequence[RequestRow]) -> dict[str, float | None]:
        return sample_figures(sample, tps, generation_s, slo, weights)

    point = figures(rows)
    boot = figures
    calibrated = calibration is not None and calibration.informative
    if calibration is not None and calibrated:
        se, sp = calibration.sensitivity, calibration.specificity
        assert se is not None and sp is not None
        point |= _corrected(point, se, sp, weights)
        draws = np.random.default_rng(seed + 1)

        def boot(sample: Sequence[RequestRow]) -> dict[str, float | None]:
            values = figures(sample)
            se_draw = draws.binomial(calibration.positives, se) / calibration.positives
            sp_draw = draws.binomial(calibration.negatives, sp) / calibration.negatives
            return values | _corrected(values, se_draw, sp_draw, weights)

    intervals = bootstrap_intervals(rows, boot, rounds=rounds, seed=seed)
    point = {name: point.get(name) for name in METRICS}  # corrected ones: None uncalibrated
    metrics = {
        name: {
            "value": value,
            "ci95": None
            if value is None or name in _NO_INTERVAL
            else list(intervals.get(name) or (value, value)),
            "unit": METRICS[name][0],
            "higher_is_better": METRICS[name][1],
        }
        for name, value in point.items()
    }
    outcomes: dict[str, int] = {}
    verdicts = {"supported": 0, "unsupported": 0, "contradicted": 0, "unverifiable": 0}
    for check in checks:
        outcomes[check["outcome"]] = outcomes.get(check["outcome"], 0) + 1
        for verdict, count in check.get("claim_counts", {}).items():
            verdicts[verdict] = verdicts.get(verdict, 0) + count
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": manifest.get("run_id"),
        "kind": manifest.get("kind", "run"),
        "throughput_measured": measured,
        # False: a target that returns no contexts (context precision is not measurable)
        "contexts_returned": any(r.get("contexts_returned", True) for r in records),
        "load_regime": manifest.get("load_regime", {}),
        "requests": len(rows),
        "errors": sum(not r.ok for r in rows),
        "checked_answers": len(checks),
        "output_tokens": output_tokens,
        "generation_s": generation_s,
        "outcomes": outcomes,
        "claims": verdicts,
        "slo": slo.model_dump(),
        "weights": weights.model_dump(),
        "bootstrap": {"rounds": rounds, "seed": seed, "unit": "request"},
        "metrics": metrics,
    }
