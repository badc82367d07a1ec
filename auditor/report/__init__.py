"""`auditor report`: one self-contained HTML file from run dirs' results alone.

Renders `templates/report.html.j2` with Jinja2 (autoescape on, undefined names are errors) from
`auditor.results.RunArtifacts` whose summaries were written. No engine, no network: charts are
inline SVG, styles and the few lines of script are inline, and everything from a model or a
document is escaped by the template.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import logging
import re
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from auditor import __version__
from auditor.claim_rows import Claim, flagged_at, hallucination_score
from auditor.compare import compare_pair, compare_reviewed, headline, reviewed_headline
from auditor.config import CONTEXT_PRECISION_VERDICTS
from auditor.errors import BadInput
from auditor.evidence.extracted import bundle_of
from auditor.files import utc_now
from auditor.formatting import format_duration_ms, format_number, format_share
from auditor.gates import GateResult
from auditor.goodput import METRICS
from auditor.history import KEY_METRICS, AuditRow, Regression, regressions
from auditor.report import charts
from auditor.results import RunArtifacts
from auditor.review import check_fingerprint, read_checked_review, run_fingerprint
from auditor.traces.assemble import SKIP_REASONS

__all__ = ["refuse_shared_names", "render_report"]

log = logging.getLogger(__name__)

_VERDICT_RANK = {"contradicted": 3, "unsupported": 2, "unverifiable": 1, "supported": 0}


def _segments(answer: str, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer cut at claim span edges; each piece carries the claims covering it.

    Several claims often map to one sentence; a piece shows the worst verdict among its
    claims and links to the first of them.
    """
    edges = {0, len(answer)}
    for claim in claims:
        if claim.get("span"):
            start, end = claim["span"]
            edges.update({max(0, min(start, len(answer))), max(0, min(end, len(answer)))})
    cuts = sorted(edges)
    pieces: list[dict[str, Any]] = []
    for start, end in itertools.pairwise(cuts):
        covering = [
            n
            for n, claim in enumerate(claims)
            if claim.get("span") and claim["span"][0] <= start and end <= claim["span"][1]
        ]
        if pieces and pieces[-1]["claims"] == covering:
            pieces[-1]["text"] += answer[start:end]
            continue
        verdict = (
            max((claims[n]["verdict"] for n in covering), key=_VERDICT_RANK.__getitem__)
            if covering
            else None
        )
        pieces.append({"text": answer[start:end], "claims": covering, "verdict": verdict})
    return pieces


def _question_views(run: RunArtifacts, index: int) -> dict[str, dict[str, Any]]:
    """Per question id: what this pipeline answered, its claims and its sources."""
    checks = {row["id"]: row for row in run.checks}
    views = {}
    for record in run.records:
        check = checks.get(record["id"])
        # where a chunk came from, said beside it: the pipeline's own retrieval, or the trusted
        # knowledge base the auditor searched for the claim (--sources kb / both)
        returned_by = "the service" if record.get("retrieval") == "target" else "the pipeline"
        chunks = {
            c["chunk_id"]: c | {"origin": f"returned by {returned_by}"}
            for c in record.get("retrieved", [])
        }
        for c in (check or {}).get("kb_chunks", []):
            chunks.setdefault(c["chunk_id"], c | {"origin": "knowledge base"})
        claims = check["claims"] if check else []
        precision = {
            v["chunk_id"]: v for v in (check or {}).get("context_verdicts", []) if "chunk_id" in v
        }
        views[record["id"]] = {
            "pipeline": run.name,
            "pipeline_index": index,
            "answer": record.get("answer") or "",
            "error": record.get("error"),
            "segments": _segments(record.get("answer") or "", claims),
            "claims": [
                {"p_supported": None, "kind": "fact", "origin": "judge", "evidence": ""}
                | {"memory": None}
                | claim
                | {
                    "sources": [
                        chunks[c] for c in claim.get("supporting_chunks", []) if c in chunks
                    ],
                    "against": [
                        chunks[c] for c in claim.get("contradicting_chunks", []) if c in chunks
                    ],
                }
                for claim in claims
            ],
            "chunks": [
                chunk | {"precision": precision.get(chunk["chunk_id"])}
                for chunk in record.get("retrieved", [])
            ],
            "contexts_returned": record.get("contexts_returned", True),
            "checked": check is not None,
            "outcome": (check or {}).get("outcome", "not checked"),
            "hallucinated": (check or {}).get("hallucinated"),
            "faithfulness": (check or {}).get("faithfulness"),
            "support_score": (check or {}).get("support_score"),
            "context_precision": (check or {}).get("context_precision"),
            "context_precision_method": _context_precision_method(run),
            "judge_failures": (check or {}).get("judge_failures", []),
            # listed claims the answer does not make (premise check): dropped, shown apart
            "listing_errors": (check or {}).get("listing_errors", []),
            # labelled answers to the same question the judge had (judge `examples`), and how
            # many of the claims' verdicts they decided
            "examples": (check or {}).get("examples"),
            # the statements of those examples the verdict prompts showed (`examples_in`)
            "reviewed": (check or {}).get("reviewed"),
            "decided_by_examples": sum(
                bool((c.get("memory") or {}).get("decided")) for c in claims
            ),
            "output_tokens": record.get("output_tokens"),
            "ttft_s": record.get("ttft_s"),
            "e2e_s": record.get("e2e_s"),
        }
    return views


def _pipeline_view(
    run: RunArtifacts,
    gate_results: Sequence[GateResult],
    history: Sequence[AuditRow],
) -> dict[str, Any]:
    past = [row for row in history if row.pipeline == run.name]
    baseline = next((row for row in reversed(past) if row.baseline), None)
    found: list[Regression] = regressions(run.summary, baseline) if baseline else []
    baseline_index = next((n for n, row in enumerate(past) if row.baseline), None)
    trend = [
        {
            "metric": metric,
            "values": [row.value(metric) for row in past],
            "svg": Markup(  # built with escaped labels
                charts.sparkline([row.value(metric) for row in past], metric, baseline_index)
            ),
        }
        for metric in KEY_METRICS
    ]
    return {
        "name": run.name,
        "run_dir": str(run.run_dir),
        "manifest": run.manifest,
        "check_manifest": run.check_manifest or {},
        "summary": run.summary,
        "context_precision_method": _context_precision_method(run),
        # people's labels made a reviewed rate (labels none of which counts make none)
        "reviewed_rate": _has_reviewed_rate(run.summary),
        "gates": [g for g in gate_results if g.pipeline == run.name],
        "baseline": baseline,
        "regressions": found,
        "history": past,
        "trend": trend,
        "damaged": run.damaged,
    }


def _context_precision_method(run: RunArtifacts) -> str | None:
    """How the run's context precision verdicts were made, in the report's words (None: the
    run was not checked)."""
    return CONTEXT_PRECISION_VERDICTS.get(run.context_precision_verdict or "")


def _support_threshold(run: RunArtifacts) -> float:
    """The support threshold of the run's check, read as `summarize_run` reads it for the
    reviewed rates (0.5 without a check manifest), so the page's flags are the command's."""
    judge = (run.check_manifest or {}).get("judge", {}).get("config", {})
    return float(judge.get("support_threshold", 0.5))


def _evidence_at(text: str, evidence: str) -> tuple[int, int] | None:
    """Where an evidence sentence lies in a chunk's text: as written, else with any run of
    whitespace standing for any other (the judge's sentence may be re-spaced); None when
    it is not there."""
    evidence = evidence.strip()
    if not evidence:
        return None
    at = text.find(evidence)
    if at != -1:
        return at, at + len(evidence)
    found = re.search(r"\s+".join(map(re.escape, evidence.split())), text)
    return found.span() if found else None


def _marked_pieces(text: str, spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """A chunk's text as plain and marked pieces, overlapping marks merged into one."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces: list[dict[str, Any]] = []
    at = 0
    for start, end in merged:
        if start > at:
            pieces.append({"text": text[at:start], "marked": False})
        pieces.append({"text": text[start:end], "marked": True})
        at = end
    if at < len(text) or not pieces:
        pieces.append({"text": text[at:], "marked": False})
    return pieces


def _answer_span(span: Any, answer: str) -> list[int] | None:
    """A claim's [start, end] in the answer, when it is one a labels file accepts."""
    if not isinstance(span, list | tuple) or len(span) != 2:
        return None
    start, end = span
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None
    return [start, end] if 0 <= start < end <= len(answer) else None


def _review_item(
    record: dict[str, Any],
    view: dict[str, Any],
    check: dict[str, Any] | None,
    threshold: float,
) -> dict[str, Any]:
    """One drawn answer for review: its claims with the judge's flags first, its sources with
    the claims' evidence sentences marked (a flagged claim's deciding chunks open), and what
    its label carries (`data`, read by review.js)."""
    answer = record.get("answer") or ""
    raw = (check or {}).get("claims", [])
    flags = [flagged_at([Claim.from_json(c)], threshold) for c in raw]
    retrieved = record.get("retrieved", [])
    texts = {c["chunk_id"]: c.get("text") or "" for c in retrieved}
    marks: dict[str, list[tuple[int, int]]] = {}
    opened: set[str] = set()
    for claim, flag in zip(raw, flags, strict=True):
        deciding = [
            c
            for c in [*claim.get("supporting_chunks", []), *claim.get("contradicting_chunks", [])]
            if c in texts
        ]
        if flag:
            opened.update(deciding)
        for chunk_id in deciding:
            found = _evidence_at(texts[chunk_id], claim.get("evidence") or "")
            if found:
                marks.setdefault(chunk_id, []).append(found)
    order = sorted(range(len(raw)), key=lambda k: not flags[k])  # stable: flagged first
    source_id = record.get("source_id")
    return {
        "id": str(record["id"]),
        "question": record.get("question", ""),
        "reference": record.get("reference"),
        "answer": view,
        "claims": [{"index": k, "flagged": flags[k], "claim": view["claims"][k]} for k in order],
        "sources": [
            {
                "chunk": chunk,
                "open": chunk["chunk_id"] in opened,
                "marked": chunk["chunk_id"] in marks,
                "pieces": _marked_pieces(chunk.get("text") or "", marks.get(chunk["chunk_id"], [])),
            }
            for chunk in view["chunks"]
        ],
        "data": {
            "question": record.get("question") or "",
            "answer": answer,
            "contexts": [c.get("text") or "" for c in retrieved],
            # the question's id: shared by every pipeline's answer to it
            "source_id": str(record["id"] if source_id in (None, "") else source_id),
            "flagged": None
            if check is None
            else flagged_at([Claim.from_json(c) for c in raw], threshold),
            # what the page's provisional rate leans on, as `review_summary` does
            "score": None
            if check is None
            else round(hallucination_score([Claim.from_json(c) for c in raw]), 6),
            "claims": [
                {"index": k, "span": _answer_span(c.get("span"), answer), "flagged": flags[k]}
                for k, c in enumerate(raw)
            ],
        },
    }


def _review_views(runs: Sequence[RunArtifacts]) -> dict[str, Any]:
    """The review section: per run with a review.json, its sampled answers in the order drawn
    (`_review_item`), the run's fingerprint its labels carry and the judge's flags the page's
    provisional rate needs (as `review_summary` counts them: one per check row); the runs
    without one; and a line per review.json that is unreadable or not the draw it says it is
    (`read_checked_review`: of another run or check, stale, edited; the report is still
    written, the review is not needed for the figures)."""
    reviews: list[dict[str, Any]] = []
    unreviewed: list[str] = []
    problems: list[str] = []
    for index, run in enumerate(runs):
        try:
            review = read_checked_review(run)
        except BadInput as exc:
            problems.append(f"{exc}; the review of {run.name} is not shown")
            log.warning(problems[-1])  # on the terminal too, not only inside the HTML
            continue
        if review is None:
            unreviewed.append(run.name)
            continue
        fingerprint = run_fingerprint(run.manifest)
        threshold = _support_threshold(run)
        checks = {str(row["id"]): row for row in run.checks}
        flags = {
            ident: flagged_at([Claim.from_json(c) for c in row.get("claims", [])], threshold)
            for ident, row in checks.items()
        }
        views = _question_views(run, index)
        questions = {str(r["id"]): r for r in run.records}
        second = _second_review(review)
        second_ids = set(second["ids"]) if second else set()
        items, missing = [], []
        for entry in review.get("sample") or []:
            ident = str(entry.get("id")) if isinstance(entry, dict) else str(entry)
            record = questions.get(ident)
            if record is None:
                missing.append(ident)
                continue
            item = _review_item(record, views[record["id"]], checks.get(ident), threshold)
            items.append(item | {"second": ident in second_ids})
        reviews.append(
            {
                "name": run.name,
                "pipeline_index": index,
                "fingerprint": fingerprint,
                # the check the labels were made on: each label carries it
                "check_fingerprint": check_fingerprint(run.check_manifest),
                "second_review": second,
                "seed": review.get("seed"),
                "population": review.get("population", "?"),
                "drawn": items,
                "missing": missing,
                "judge": {
                    "population": len(flags),
                    "flagged": sum(flags.values()),
                    "scores": [
                        round(hallucination_score([Claim.from_json(c) for c in row["claims"]]), 6)
                        for row in run.checks
                    ],
                },
            }
        )
    agreements = [found for index, run in enumerate(runs) if (found := _agreement_view(run, index))]
    return {
        "reviews": reviews,
        "unreviewed": unreviewed,
        "review_problems": problems,
        "agreements": agreements,
    }


# how the report names each role of a label (`role` in a labels file)
_ROLE_NAMES = {
    "first": "first review",
    "second": "second review (blind)",
    "adjudicator": "adjudicated",
}


def _second_review(review: dict[str, Any]) -> dict[str, Any] | None:
    """review.json's blind second review (`auditor review --second-review SHARE`): its share
    and the drawn answers' ids a second person reviews, in the order drawn (None without
    one)."""
    second = review.get("second_review")
    if not isinstance(second, dict) or not isinstance(second.get("ids"), list):
        return None
    ids = [str(i) for i in second["ids"]]
    order = {
        str(e.get("id") if isinstance(e, dict) else e): k
        for k, e in enumerate(review.get("sample") or [])
    }
    ids.sort(key=lambda i: order.get(i, len(order)))  # the order drawn, whatever the file's
    share = second.get("share")
    return {
        "share": share if isinstance(share, int | float) and not isinstance(share, bool) else None,
        "ids": ids,
    }


def _agreement_view(run: RunArtifacts, index: int) -> dict[str, Any] | None:
    """The two reviewers' agreement of a run as the report shows it, from summary.json's
    `reviewed.agreement` (`auditor.agreement.reviewer_agreement`): kappa with its interval
    (or why there is none), observed, positive and negative agreement, who reviewed in which
    role, and each disagreement with how it was settled. None without one."""
    found = (run.summary.get("reviewed") or {}).get("agreement")
    if not isinstance(found, dict) or not found.get("double_reviewed"):
        return None
    interval = found.get("kappa_interval")
    names = found.get("reviewers") or {}
    disagreements = []
    for entry in found.get("disagreements") or []:
        if not isinstance(entry, dict):
            continue
        settled, by = entry.get("adjudicated"), entry.get("adjudicator")
        disagreements.append(
            {
                "id": str(entry.get("id")),
                "first": _said(entry.get("first")),
                "second": _said(entry.get("second")),
                "settled": settled is not None,
                "outcome": _said(settled) if settled is not None else None,
                "adjudicator": by or "(unnamed)",
            }
        )
    return {
        "name": run.name,
        "pipeline_index": index,
        "double_reviewed": found["double_reviewed"],
        "kappa": found.get("kappa"),
        "kappa_interval": interval if isinstance(interval, list) and len(interval) == 2 else None,
        "kappa_undefined": found.get("kappa_undefined"),
        "observed": found.get("observed_agreement"),
        "positive": found.get("positive_agreement"),
        "negative": found.get("negative_agreement"),
        "table": found.get("table") or {},
        "reviewers": {role: list(names.get(role) or []) for role in _ROLE_NAMES},
        "roles": _ROLE_NAMES,
        "disagreements": disagreements,
        "unsettled": sum(not d["settled"] for d in disagreements),
    }


def _has_reviewed_rate(summary: dict[str, Any]) -> bool:
    """Whether people's labels made a reviewed rate (some label counted in it)."""
    return bool((summary.get("reviewed") or {}).get("answer_rate"))


def _said(hallucinated: Any) -> str:
    return "hallucinated" if hallucinated is True else "not hallucinated"


def refuse_shared_names(runs: Sequence[RunArtifacts]) -> None:
    """A report compares pipelines: two run dirs of one pipeline are a one-line BadInput."""
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        shared = sorted({n for n in names if names.count(n) > 1})[0]
        dirs = [str(run.run_dir) for run in runs if run.name == shared]
        raise BadInput(
            f"{' and '.join(dirs)} hold the same pipeline name {shared!r}; report runs of "
            "different pipelines, or compare past audits with `auditor history`"
        )


def render_report(
    runs: Sequence[RunArtifacts],
    gate_results: Sequence[GateResult] = (),
    history: Sequence[AuditRow] = (),
    generated_at: str | None = None,
) -> str:
    """The report's HTML for runs whose summaries were computed (`summarize_run`), stamped
    `generated_at` (default now; a bundle gives the audit's end, for the same bytes)."""
    refuse_shared_names(runs)
    pipelines = [_pipeline_view(run, gate_results, history) for run in runs]
    ranked = sorted(
        (r for r in runs if r.summary["metrics"]["goodput_tps"]["value"] is not None),
        key=lambda r: -r.summary["metrics"]["goodput_tps"]["value"],
    )
    contrasts = (
        [compare_pair(ranked[0], ranked[1], f) for f in ("goodput_tps", "hallucination_rate")]
        if len(ranked) >= 2
        else []
    )
    # with labels for every pipeline, the headline is the people's: the reviewed rates
    # (the two best by goodput; without throughput, by the reviewed rate)
    reviewed_pair = None
    if len(runs) >= 2 and all(_has_reviewed_rate(run.summary) for run in runs):
        best = (
            ranked
            if len(ranked) >= 2
            else sorted(runs, key=lambda r: r.summary["reviewed"]["answer_rate"]["value"])
        )
        reviewed_pair = compare_reviewed(best[0], best[1])
    questions: dict[str, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        views = _question_views(run, index)
        for record in run.records:
            entry = questions.setdefault(
                record["id"],
                {
                    "id": record["id"],
                    "question": record.get("question", ""),
                    "reference": record.get("reference"),
                    "answers": [],
                },
            )
            entry["answers"].append(views[record["id"]])

    def metric(run: RunArtifacts, name: str) -> tuple[float | None, tuple[float, float] | None]:
        entry = run.summary["metrics"][name]
        low_high = entry["ci95"]
        return entry["value"], (low_high[0], low_high[1]) if low_high else None

    throughput_groups = [
        charts.BarGroup(
            label=run.name,
            values={
                "raw tok/s": metric(run, "tps")[0],
                "goodput tok/s": metric(run, "goodput_tps")[0],
            },
            intervals={"goodput tok/s": metric(run, "goodput_tps")[1]},
        )
        for run in runs
    ]
    figures = {
        "throughput": charts.grouped_bars(
            throughput_groups,
            ["raw tok/s", "goodput tok/s"],
            "Goodput against raw throughput",
            "tok/s",
        ),
        "verdicts": charts.stacked_shares(
            [(run.name, run.summary["claims"]) for run in runs], "Claim verdicts"
        ),
        "ttft": charts.latency_strips(
            [
                (
                    run.name,
                    [r["ttft_s"] for r in run.records if r.get("ttft_s") and not r.get("error")],
                )
                for run in runs
            ],
            "Time to first token per request",
        ),
        "e2e": charts.latency_strips(
            [
                (
                    run.name,
                    [r["e2e_s"] for r in run.records if r.get("e2e_s") and not r.get("error")],
                )
                for run in runs
            ],
            "End-to-end latency per request",
        ),
    }
    environment = Environment(
        loader=PackageLoader("auditor.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["num"] = format_number
    environment.filters["duration"] = format_duration_ms
    environment.filters["pct"] = format_share
    templates = files("auditor.report") / "templates"
    # one inline script (the CSP admits it by its hash): the filters, then the review marks
    script = "\n".join(
        (templates / name).read_text(encoding="utf-8") for name in ("report.js", "review.js")
    )

    return environment.get_template("report.html.j2").render(
        pipelines=pipelines,
        questions=list(questions.values()),
        figures={k: Markup(v) for k, v in figures.items()},  # built with escaped labels
        gate_results=list(gate_results),
        gates_passed=all(g.passed for g in gate_results),
        headline=(reviewed_headline(reviewed_pair) if reviewed_pair else None)
        or (headline(contrasts[0]) if contrasts else None),
        reviewed_pair=reviewed_pair,
        contrasts=contrasts,
        metrics=METRICS,
        key_metrics=KEY_METRICS,
        skip_reasons=SKIP_REASONS,  # why an imported trace was skipped, in words
        generated_at=generated_at or utc_now(),
        # run dirs of an extracted bundle: its statement digest and claimed signers, or where
        # what this report shows is not what the statement signed
        bundle=bundle_of(runs, gate_results),
        version=__version__,
        **_review_views(runs),
        script=Markup(script),  # our own static file, never model or document text
        # the CSP allows this one script by its hash instead of any inline script
        script_hash="sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode(),
    )
