"""`auditor calibrate`: how the judge agrees with people on answers they labelled.

The labels file is the `check --answers` format plus `hallucinated` (true/false) and optional
`spans` of hallucinated text (`{"start": s, "end": e}` or `[s, e]`, character offsets in the
answer; the shape of RAGTruth). The answers are checked like any others (resumable), then:

- answer level: the decision threshold with the highest balanced accuracy (`best_threshold`),
  and at it the judge's sensitivity and specificity with Wilson 95 % intervals, AUROC and the
  ROC of the answer score;
- claim level, where spans are given: a claim is hallucinated when its answer span overlaps a
  labelled one; sensitivity and specificity of the claim verdicts at the same threshold.

CAL_DIR/calibration.json records them with the judge's identity and config hash and the labels'
hash and size: a calibration applies only to the judge that made it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.calibration import JudgeAccuracy, wilson_interval
from auditor.config import JudgeConfig, without_engine_only
from auditor.errors import BadInput
from auditor.jsonl import iter_objects
from auditor.verify.base import Claim
from auditor.verify.claims import flagged_at, ranking_score
from auditor.verify.thresholds import auroc, balanced_accuracy, best_threshold, roc_points

__all__ = [
    "CALIBRATION",
    "MIN_LABELLED",
    "Calibration",
    "HumanLabel",
    "build_calibration",
    "calibration_for",
    "judge_fingerprint",
    "load_calibration",
    "read_labels",
    "shipped_calibrations",
]

CALIBRATION = "calibration.json"
CALIBRATION_SCHEMA_VERSION = 1
MIN_LABELLED = 20


@dataclass(frozen=True)
class HumanLabel:
    """A person's verdict on one answer."""

    hallucinated: bool
    spans: tuple[tuple[int, int], ...] = ()


def _span(where: str, value: Any) -> tuple[int, int]:
    if isinstance(value, dict):
        value = [value.get("start"), value.get("end")]
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] < value[1]
    ):
        return value[0], value[1]
    raise BadInput(
        f'{where}: each of "spans" must be {{"start": S, "end": E}} or [S, E] with 0 <= S < E'
    )


def read_labels(path: Path) -> dict[str, HumanLabel]:
    """{answer id: label} from a labels file; one-line BadInput naming file and line."""
    labels: dict[str, HumanLabel] = {}
    for where, data in iter_objects(path, "id, question, contexts, answer, hallucinated"):
        hallucinated = data.get("hallucinated")
        if not isinstance(hallucinated, bool):
            raise BadInput(f'{where}: "hallucinated" must be true or false')
        spans = data.get("spans") or []
        if not isinstance(spans, list):
            raise BadInput(f'{where}: "spans" must be a list')
        labels[str(data.get("id"))] = HumanLabel(
            hallucinated, tuple(_span(where, s) for s in spans)
        )
    return labels


def labels_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _accuracy_json(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Counts, sensitivity and specificity (Wilson intervals) of (gold, flagged) pairs."""
    accuracy = JudgeAccuracy(
        true_positives=sum(g and f for g, f in pairs),
        positives=sum(g for g, _ in pairs),
        true_negatives=sum(not g and not f for g, f in pairs),
        negatives=sum(not g for g, _ in pairs),
    )
    return {
        "true_positives": accuracy.true_positives,
        "positives": accuracy.positives,
        "true_negatives": accuracy.true_negatives,
        "negatives": accuracy.negatives,
        "sensitivity": accuracy.sensitivity,
        "sensitivity_interval": wilson_interval(accuracy.true_positives, accuracy.positives),
        "specificity": accuracy.specificity,
        "specificity_interval": wilson_interval(accuracy.true_negatives, accuracy.negatives),
        "balanced_accuracy": balanced_accuracy(pairs) if pairs else None,
        "informative": accuracy.informative,
    }


def build_calibration(
    checks: list[dict[str, Any]], labels: dict[str, HumanLabel], source: Path
) -> dict[str, Any]:
    """The calibration figures of checked, labelled answers (BadInput when they cannot
    support one: too few answers, a class missing, a judge no better than chance)."""
    rows = [row for row in checks if row["id"] in labels]
    if len(rows) < MIN_LABELLED:
        raise BadInput(
            f"{source}: {len(rows)} labelled answers checked; a calibration needs at least "
            f"{MIN_LABELLED} (50-100 recommended)"
        )
    gold = [labels[row["id"]].hallucinated for row in rows]
    if all(gold) or not any(gold):
        missing = "clean" if all(gold) else "hallucinated"
        raise BadInput(
            f"{source}: no {missing} answer among the labels, so the judge's "
            f"{'specificity' if missing == 'clean' else 'sensitivity'} is undefined; add some"
        )
    claims = {row["id"]: [Claim.from_json(c) for c in row["claims"]] for row in rows}
    scores = [ranking_score(claims[row["id"]]) for row in rows]
    # rounded: a judge config holds it as written, and the fingerprint must match exactly
    threshold = round(best_threshold(scores, gold), 3)
    answer_pairs = [
        (g, flagged_at(claims[row["id"]], threshold)) for row, g in zip(rows, gold, strict=True)
    ]
    answer_level = _accuracy_json(answer_pairs)
    if not answer_level["informative"]:
        raise BadInput(
            f"{source}: the judge is no better than chance on these labels (sensitivity "
            f"{answer_level['sensitivity']:.2f} + specificity {answer_level['specificity']:.2f} "
            "<= 1), so its rates cannot be corrected; use a stronger judge"
        )
    claim_pairs = []
    with_spans = [
        row for row in rows if labels[row["id"]].hallucinated is False or labels[row["id"]].spans
    ]
    for row in with_spans:
        spans = labels[row["id"]].spans
        for claim in claims[row["id"]]:
            if claim.verdict == "unverifiable" or claim.span is None:
                continue
            start, end = claim.span
            bad = any(start < e and s < end for s, e in spans)
            claim_pairs.append((bad, flagged_at([claim], threshold)))
    return {
        "schema_version": CALIBRATION_SCHEMA_VERSION,
        "answers": len(rows),
        "hallucinated": sum(gold),
        "threshold": threshold,
        "threshold_rule": "highest balanced accuracy on these answers (auditor.verify.thresholds)",
        "answer_level": answer_level | {"auroc": auroc(scores, gold)},
        "roc": [[round(x, 4), round(y, 4)] for x, y in roc_points(scores, gold)],
        "claim_level": _accuracy_json(claim_pairs) | {"claims": len(claim_pairs)}
        if claim_pairs
        else None,
    }


# judge settings that change no verdict: left out of the fingerprint
_NOT_VERDICTS = {"name", "metrics", "retries", "answers_per_batch"}


def judge_fingerprint(
    identity: dict[str, Any] | None, config: dict[str, Any], verdict_logic: str | None
) -> dict[str, Any]:
    """What must match for a calibration to apply: the judge's weights (hash), backend and the
    dtype it ran in, the auditor's verdict logic (prompts, claim rules: `VERDICT_LOGIC`), and a
    hash of the settings that decide verdicts (the threshold included; not the metrics, batch
    sizes or CPU threads)."""
    identity = identity or {}
    verdict = {k: v for k, v in without_engine_only(config).items() if k not in _NOT_VERDICTS}
    encoded = json.dumps(verdict, sort_keys=True, separators=(",", ":")).encode()
    return {
        "model": identity.get("weights_sha256")
        or identity.get("gguf_sha256")
        or identity.get("name"),
        "backend": identity.get("backend"),
        "dtype": identity.get("dtype"),
        "verdict_logic": verdict_logic,
        "verdict_sha256": hashlib.sha256(encoded).hexdigest(),
    }


@dataclass(frozen=True)
class Calibration:
    """A calibration as `auditor calibrate` wrote it, with where it came from."""

    path: Path
    data: dict[str, Any]

    @property
    def claim_accuracy(self) -> JudgeAccuracy | None:
        """The judge's claim-level accuracy (None without labelled spans)."""
        level = self.data.get("claim_level")
        if not level:
            return None
        return JudgeAccuracy(
            level["true_positives"], level["positives"], level["true_negatives"], level["negatives"]
        )

    def mismatch(self, check_manifest: dict[str, Any] | None) -> str | None:
        """Why this calibration does not apply to the judge of a check (None: it applies)."""
        judge = (check_manifest or {}).get("judge", {})
        if not judge:
            return "the run was not checked"
        theirs = judge_fingerprint(
            judge.get("identity"), judge.get("config", {}), judge.get("verdict_logic")
        )
        ours = self.data["judge"]["fingerprint"]
        for key, what in (
            ("model", "judge model"),
            ("backend", "judge backend"),
            ("dtype", "judge dtype"),
            ("verdict_logic", "auditor verdict logic (prompts, claim rules)"),
            ("verdict_sha256", "judge settings (prompt, threshold, chunks per claim, ...)"),
        ):
            if theirs.get(key) != ours.get(key):
                return f"another {what}: {theirs.get(key)} here, {ours.get(key)} calibrated"
        return None

    def judge_config(self, config: JudgeConfig) -> JudgeConfig:
        """`config` at this calibration's threshold; BadInput when its verdict settings are not
        the calibrated ones (checked before any engine starts)."""
        at = config.model_copy(update={"support_threshold": self.data["threshold"]})
        ours = judge_fingerprint(None, at.model_dump(mode="json"), None)["verdict_sha256"]
        if ours != self.data["judge"]["fingerprint"]["verdict_sha256"]:
            raise BadInput(
                f"{self.path}: calibrated for other judge settings than {config.name}'s (prompt, "
                "model, chunks per claim, ...); calibrate this judge with `auditor calibrate`"
            )
        return at

    def provenance(self) -> dict[str, Any]:
        """What a summary and a report say about the calibration applied."""
        answer, claim = self.data["answer_level"], self.data.get("claim_level")
        return {
            "path": str(self.path),
            "labels": self.data["labels"],
            "answers": self.data["answers"],
            "hallucinated": self.data["hallucinated"],
            "threshold": self.data["threshold"],
            "domain": self.data.get("domain"),
            "answer_level": {k: answer[k] for k in _SHOWN if k in answer},
            "claim_level": None if not claim else {k: claim[k] for k in _SHOWN if k in claim},
        }


_SHOWN = (
    "sensitivity",
    "sensitivity_interval",
    "specificity",
    "specificity_interval",
    "balanced_accuracy",
    "auroc",
    "claims",
)


def load_calibration(path: Path) -> Calibration:
    """A calibration from CAL_DIR (or its calibration.json); BadInput in one line otherwise."""
    file = path / CALIBRATION if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BadInput(
            f"{file}: no such calibration; make one with `auditor calibrate --labels F --out DIR`"
        ) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(
            f"{file}: not a readable calibration ({exc}); run auditor calibrate again"
        ) from exc
    if not isinstance(data, dict) or data.get("schema_version") != CALIBRATION_SCHEMA_VERSION:
        raise BadInput(
            f"{file}: not a calibration of this auditor (schema); run auditor calibrate again"
        )
    if "fingerprint" not in data.get("judge", {}):
        raise BadInput(
            f"{file}: calibration without a judge fingerprint; run auditor calibrate again"
        )
    return Calibration(file, data)


def shipped_calibrations() -> list[Calibration]:
    """The calibrations that ship with the auditor (auditor/calibrations/: the default judge's,
    made from RAGTruth QA dev by `bench/agreement.py --write-calibration`)."""
    from importlib.resources import files

    found = []
    for entry in sorted(files("auditor").joinpath("calibrations").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            found.append(
                Calibration(Path(str(entry)), json.loads(entry.read_text(encoding="utf-8")))
            )
    return found


def calibration_for(check_manifest: dict[str, Any] | None) -> Calibration | None:
    """The shipped calibration that applies to this check's judge, if one does."""
    return next((c for c in shipped_calibrations() if c.mismatch(check_manifest) is None), None)
