"""`auditor calibrate`: how the judge agrees with people on answers they labelled.

The labels file is the `check --answers` format plus `hallucinated` (true/false) and optional
`spans` of hallucinated text (`{"start": s, "end": e}` or `[s, e]`, character offsets in the
answer; the shape of RAGTruth). The answers are checked like any others (resumable), then:

- the decision threshold: the one with the highest balanced accuracy on all the answers
  (`best_threshold`); the judge runs at it wherever the calibration applies;
- the judge's sensitivity and specificity, out-of-fold: the answers fall into 5 folds by
  question (`source_id`, else the question text: answers to one question share a fold); each
  fold is judged at the threshold the same rule chooses on the other folds, and the counts are
  pooled. These are the figures a correction uses: at a threshold chosen on the same answers
  they would be optimistic. Answer level (with Wilson 95 % intervals, AUROC and the ROC of the
  answer score) and, where spans are given, claim level (a claim is hallucinated when its
  answer span overlaps a labelled one);
- for reference only, the same figures in-sample (at the threshold chosen on all answers).

CAL_DIR/calibration.json records them with the judge's identity, fingerprint and verdict
settings, the labels' hash and size and their domain: a calibration applies only to the judge
that made it, and fits best on answers like the labelled ones.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from auditor.calibration import JudgeAccuracy, wilson_interval
from auditor.claim_rows import Claim, flagged_at, ranking_score
from auditor.config import (
    EXAMPLE_SETTINGS,
    JudgeConfig,
    format_validation_error,
    parse_set_option,
    shipped_calibration_file,
    without_engine_only,
)
from auditor.engine_dtype import engine_dtype
from auditor.errors import BadInput
from auditor.files import read_regular_file
from auditor.labels import ReviewLabel, settle
from auditor.labels import read_labels as read_labels_file
from auditor.run_shapes import ArtifactPart
from auditor.verify.thresholds import auroc, balanced_accuracy, best_threshold, roc_points

__all__ = [
    "CALIBRATION",
    "FOLDS",
    "MIN_LABELLED",
    "Calibration",
    "HumanLabel",
    "build_calibration",
    "calibration_folds",
    "judge_fingerprint",
    "judge_section",
    "load_calibration",
    "question_folds",
    "read_labels",
    "resolve_calibration",
    "shipped_calibrations",
    "verdict_settings",
]

CALIBRATION = "calibration.json"
# 2: sensitivity and specificity out-of-fold, the judge's verdict settings, a domain
# (1: in-sample, at a threshold chosen on the same answers; refused)
CALIBRATION_SCHEMA_VERSION = 2
MIN_LABELLED = 20
FOLDS = 5
FOLD_RULE = (
    "answers grouped by question (source_id, else the question text) into folds by a hash of "
    "it; each fold judged at the threshold chosen by the same rule on the other folds, the "
    "counts pooled over the folds"
)
HOW_TO_CALIBRATE = "auditor calibrate --labels LABELLED.jsonl --out CAL_DIR"


@dataclass(frozen=True)
class HumanLabel:
    """A person's verdict on one answer, and the question it answers (its fold)."""

    hallucinated: bool
    spans: tuple[tuple[int, int], ...] = ()
    question: str = ""  # source_id, else the question text: answers to one share a fold


def read_labels(path: Path) -> dict[str, HumanLabel]:
    """{answer id: label} from a labels file (a review page's download as it is: ids are
    PIPELINE/ID there), read by the one labels reader and settled (copies collapse, reviewers'
    disagreements need an adjudication); one-line BadInput naming file and line."""
    return {
        label.labelled_id: HumanLabel(
            label.hallucinated, label.spans, label.source_id or label.question or ""
        )
        for label in settled_labels(path)
    }


def settled_labels(path: Path) -> list[ReviewLabel]:
    """A calibration's labelled answers: every line needs its question and answer."""
    return settle(read_labels_file(path, needs=("question", "answer")))


def labels_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def question_folds(questions: Sequence[str], folds: int = FOLDS) -> list[int]:
    """The cross-validation fold of each answer, by the question it answers: sha256 of
    "fold:" + question, modulo `folds` (fewer with fewer questions). With 5 or more
    questions these are the folds of `bench/agreement.py --cv`."""
    count = min(folds, len(set(questions)))
    return [
        int(hashlib.sha256(f"fold:{q}".encode()).hexdigest(), 16) % max(1, count) for q in questions
    ]


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


def _claim_pairs(
    answers: list[tuple[list[Claim], HumanLabel, float]],
) -> list[tuple[bool, bool]]:
    """(hallucinated by the labelled spans, flagged) of each judged claim of the answers whose
    labels can say: clean answers, and hallucinated ones with spans; each answer's claims at
    its own threshold."""
    pairs = []
    for claims, label, threshold in answers:
        if label.hallucinated and not label.spans:
            continue
        for claim in claims:
            if claim.verdict == "unverifiable" or claim.span is None:
                continue
            start, end = claim.span
            bad = any(start < e and s < end for s, e in label.spans)
            pairs.append((bad, flagged_at([claim], threshold)))
    return pairs


def _claim_level(pairs: list[tuple[bool, bool]]) -> dict[str, Any] | None:
    """Claim-level figures, only where the labels give claims of both classes (a sensitivity
    or specificity of no claims is undefined, and no rate can be corrected with it)."""
    if not any(gold for gold, _ in pairs) or all(gold for gold, _ in pairs):
        return None
    return _accuracy_json(pairs) | {"claims": len(pairs)}


def _why_no_claim_level(pairs: list[tuple[bool, bool]], labels: Sequence[HumanLabel]) -> str | None:
    """Why a calibration has no claim level, in a reader's words (None: it has one)."""
    if _claim_level(pairs) is not None:
        return None
    if not any(label.spans for label in labels if label.hallucinated):
        return (
            "the hallucinated answers carry no spans, so no claim is known to be hallucinated; "
            "mark the hallucinated text (spans) to calibrate claim rates"
        )
    if not any(gold for gold, _ in pairs):
        return "no judged claim overlaps a labelled span, so no claim is known to be hallucinated"
    return "every judged claim overlaps a labelled span, so no claim is known to be clean"


def calibration_folds(labels: Sequence[HumanLabel], source: Path, limited: str = "") -> list[int]:
    """The fold of each labelled answer; BadInput when the labels alone cannot support a
    calibration: too few answers, a class missing, answers to one question, or a class whose
    answers all fall in one fold (no other fold to choose its threshold on). It needs no
    verdict, so `calibrate` asks it before any engine starts. `limited` names a --limit."""
    if len(labels) < MIN_LABELLED:
        raise BadInput(
            f"{source}: {len(labels)} labelled answers{limited}; a calibration needs at least "
            f"{MIN_LABELLED} (50-100 recommended)"
        )
    gold = [label.hallucinated for label in labels]
    if all(gold) or not any(gold):
        missing = "clean" if all(gold) else "hallucinated"
        raise BadInput(
            f"{source}: no {missing} answer among the {len(labels)} labels{limited}, so the "
            f"judge's {'specificity' if missing == 'clean' else 'sensitivity'} is undefined; "
            "add some"
        )
    folds = question_folds([label.question for label in labels])
    if len(set(folds)) < 2:
        raise BadInput(
            f"{source}: all {len(folds)} answers{limited} are to one question; out-of-fold "
            "figures (folds by question) need answers to several questions; label answers to more"
        )
    for fold in sorted(set(folds)):
        kinds = {g for g, f in zip(gold, folds, strict=True) if f != fold}
        if len(kinds) < 2:
            kind = "hallucinated" if False in kinds else "clean"
            raise BadInput(
                f"{source}: the {kind} answers{limited} all fall in one of the "
                f"{len(set(folds))} folds by question, leaving none to choose its threshold on; "
                f"label {kind} answers to more questions"
            )
    return folds


def _fold_thresholds(scores: list[float], gold: list[bool], folds: list[int]) -> dict[int, float]:
    """Per fold, the threshold the rule chooses on the other folds (`calibration_folds` made
    sure that they hold both kinds of answer)."""
    chosen = {}
    for fold in sorted(set(folds)):
        train = [n for n, f in enumerate(folds) if f != fold]
        chosen[fold] = best_threshold([scores[n] for n in train], [gold[n] for n in train])
    return chosen


def build_calibration(
    checks: list[dict[str, Any]], labels: dict[str, HumanLabel], source: Path
) -> dict[str, Any]:
    """The calibration figures of checked, labelled answers (BadInput when they cannot
    support one: too few answers, a class missing, answers to too few questions for folds,
    a judge no better than chance out-of-fold)."""
    rows = [row for row in checks if row["id"] in labels]
    answer_labels = [labels[row["id"]] for row in rows]
    folds = calibration_folds(answer_labels, source)
    gold = [label.hallucinated for label in answer_labels]
    claims = [[Claim.from_json(c) for c in row["claims"]] for row in rows]
    scores = [ranking_score(c) for c in claims]
    questions = [label.question for label in answer_labels]
    by_fold = _fold_thresholds(scores, gold, folds)
    held_out = [by_fold[f] for f in folds]  # the threshold each answer is judged at
    answer_level = _accuracy_json(
        [(g, flagged_at(c, t)) for g, c, t in zip(gold, claims, held_out, strict=True)]
    )
    if not answer_level["informative"]:
        raise BadInput(
            f"{source}: out-of-fold, the judge is no better than chance on these labels "
            f"(sensitivity {answer_level['sensitivity']:.2f} + specificity "
            f"{answer_level['specificity']:.2f} <= 1), so its rates cannot be corrected; "
            "use a stronger judge or label more answers"
        )
    claim_pairs = _claim_pairs(list(zip(claims, answer_labels, held_out, strict=True)))
    # rounded: a judge config holds it as written, and the fingerprint must match exactly
    threshold = round(best_threshold(scores, gold), 3)
    at_threshold = [threshold] * len(rows)
    in_sample_claims = _claim_pairs(list(zip(claims, answer_labels, at_threshold, strict=True)))
    return {
        "schema_version": CALIBRATION_SCHEMA_VERSION,
        "answers": len(rows),
        "hallucinated": sum(gold),
        "questions": len(set(questions)),
        "threshold": threshold,
        "threshold_rule": "highest balanced accuracy on all these answers "
        "(auditor.verify.thresholds.best_threshold)",
        "out_of_fold": {
            "figures": ["answer_level", "claim_level"],
            "folds": len(set(folds)),
            "rule": FOLD_RULE,
            "thresholds": [round(by_fold[f], 4) for f in sorted(by_fold)],
        },
        "answer_level": answer_level | {"auroc": auroc(scores, gold)},
        "claim_level": _claim_level(claim_pairs),
        "claim_level_absent": _why_no_claim_level(claim_pairs, answer_labels),
        "in_sample": {
            "note": "at the threshold chosen on these same answers: optimistic, never used "
            "to correct a rate",
            "answer_level": _accuracy_json(
                [(g, flagged_at(c, threshold)) for g, c in zip(gold, claims, strict=True)]
            ),
            "claim_level": _claim_level(in_sample_claims),
        },
        "roc": [[round(x, 4), round(y, 4)] for x, y in roc_points(scores, gold)],
    }


# judge settings that change no verdict: left out of the fingerprint
_NOT_VERDICTS = {
    "name",
    "metrics",
    "retries",
    "answers_per_batch",
    "context_precision_verdict",  # context precision only, no claim's verdict
}


def verdict_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings of a dumped judge config that decide verdicts (the threshold included;
    not the metrics, batch sizes or CPU threads). Examples count by whether there were any
    (their file is recorded in the check), and their memory weights only with them."""
    settings = {k: v for k, v in without_engine_only(config).items() if k not in _NOT_VERDICTS}
    if settings.pop("examples", None) is None:
        for key in EXAMPLE_SETTINGS:
            settings.pop(key, None)
    else:
        settings["examples"] = "given"
    return settings


def judge_fingerprint(
    identity: dict[str, Any] | None, config: dict[str, Any], verdict_logic: str | None
) -> dict[str, Any]:
    """What must match for a calibration to apply: the judge's weights (hash), backend and the
    dtype it ran in, the auditor's verdict logic (prompts, claim rules: `VERDICT_LOGIC`), and a
    hash of the settings that decide verdicts (`verdict_settings`)."""
    identity = identity or {}
    encoded = json.dumps(verdict_settings(config), sort_keys=True, separators=(",", ":")).encode()
    return {
        "model": identity.get("weights_sha256")
        or identity.get("gguf_sha256")
        or identity.get("name"),
        "backend": identity.get("backend"),
        "dtype": identity.get("dtype"),
        "verdict_logic": verdict_logic,
        "verdict_sha256": hashlib.sha256(encoded).hexdigest(),
    }


def judge_section(
    judge: dict[str, Any], threshold: float, *, identity_keys: Sequence[str] | None = None
) -> dict[str, Any]:
    """The `judge` of a calibration from a check manifest's `judge`, as the judge will run
    where the calibration applies: at its threshold."""
    identity = judge.get("identity") or {}
    at = judge["config"] | {"support_threshold": threshold}
    return {
        "name": judge["config"].get("name"),
        **({"sha256": judge["sha256"]} if "sha256" in judge else {}),
        "identity": identity
        if identity_keys is None
        else {k: identity.get(k) for k in identity_keys},
        "fingerprint": judge_fingerprint(identity, at, judge.get("verdict_logic")),
        "verdict_settings": verdict_settings(at),
    }


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _setting_differences(here: dict[str, Any], calibrated: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ (support_threshold last)."""
    ours, theirs = _flat(here), _flat(calibrated)
    keys = sorted(set(ours) | set(theirs), key=lambda k: (k == "support_threshold", k))
    return [k for k in keys if ours.get(k) != theirs.get(k)]


def _set_flag(flag: str, key: str, value: Any) -> str:
    """`--set key=value` as a user types it (shell-quoted where needed)."""
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and parse_set_option(f"k={value}")[1] != value:
        text = json.dumps(value)  # "true", "3": quoted, or TOML reads them as another type
    return f"{flag} {shlex.quote(f'{key}={text}')}"


def _shown(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)


@dataclass(frozen=True)
class Calibration:
    """A calibration as `auditor calibrate` wrote it, with where it came from and the name it
    was given by (`--calibration NAME_OR_PATH`)."""

    path: Path
    data: dict[str, Any]
    name: str = ""

    @property
    def label(self) -> str:
        """How the user named it: a shipped name, or the path given."""
        return self.name or str(self.path)

    @property
    def domain(self) -> str:
        return str(self.data.get("domain") or f"labels {self.data['labels']['path']}")

    @property
    def claim_accuracy(self) -> JudgeAccuracy | None:
        """The judge's out-of-fold claim-level accuracy (None without labelled spans)."""
        level = self.data.get("claim_level")
        if not level or not level.get("positives") or not level.get("negatives"):
            return None  # an earlier auditor wrote claim levels with one class only
        return JudgeAccuracy(
            level["true_positives"], level["positives"], level["true_negatives"], level["negatives"]
        )

    def _settings_differ(self, here: dict[str, Any], flag: str) -> tuple[str, list[str]] | None:
        """The verdict settings that differ from the calibrated ones, named with values, and
        the `flag`s that set the calibrated values (None: none differs, or the calibration
        does not record its settings)."""
        calibrated = self.data["judge"].get("verdict_settings")
        if calibrated is None:
            return None
        keys = _setting_differences(here, calibrated)
        if not keys:
            return None
        ours, theirs = _flat(here), _flat(calibrated)
        what = "; ".join(
            f"{k} is {_shown(ours.get(k))} here, {_shown(theirs.get(k))} calibrated" for k in keys
        )
        flags = [
            _set_flag(flag, k, theirs[k]) for k in keys if k != "support_threshold" and k in theirs
        ]
        return what, flags

    def mismatch(self, check_manifest: dict[str, Any] | None) -> str | None:
        """Why this calibration does not apply to the judge of a check, naming the setting that
        differs and the flag that fixes it (None: it applies)."""
        judge = (check_manifest or {}).get("judge", {})
        quoted = shlex.quote(self.label)
        if not judge:
            return (
                f"the run was not checked; check it with `auditor check RUN_DIR "
                f"--calibration {quoted}`"
            )
        theirs = judge_fingerprint(
            judge.get("identity"), judge.get("config", {}), judge.get("verdict_logic")
        )
        ours = self.data["judge"]["fingerprint"]
        for key, what in (
            ("model", "judge model"),
            ("backend", "judge backend"),
            ("dtype", "judge dtype"),
        ):
            if theirs.get(key) != ours.get(key):
                other = shipped_calibrations().get(
                    f"{self.data['judge'].get('name')}.{theirs.get(key)}"
                )
                if key == "dtype" and other is not None:
                    return (
                        f"another {what}: {theirs.get(key)} here, {ours.get(key)} calibrated; "
                        f"the calibration shipped for {theirs.get(key)} is "
                        f"`--calibration {other.name.removesuffix('.json')}`"
                    )
                return (
                    f"another {what}: {theirs.get(key)} here, {ours.get(key)} calibrated; check "
                    f"with the calibrated judge (--judge), or calibrate this one on your labels "
                    f"on this machine: `{HOW_TO_CALIBRATE}`"
                )
        if theirs.get("verdict_logic") != ours.get("verdict_logic"):
            return (
                f"another auditor verdict logic (prompts, claim rules): "
                f"{theirs.get('verdict_logic')} here, {ours.get('verdict_logic')} calibrated; "
                f"calibrate again with this auditor: `{HOW_TO_CALIBRATE}`"
            )
        if theirs["verdict_sha256"] != ours["verdict_sha256"]:
            again = (
                f"`auditor check ... --calibration {quoted}` (or `auditor audit --calibration "
                f"{quoted}`)"
            )
            where = "into a new --out dir or after removing checks.jsonl"
            differ = self._settings_differ(verdict_settings(judge.get("config", {})), "--set")
            if differ is None:
                return (
                    "other judge settings (prompt, threshold, chunks per claim, ...); check the "
                    f"answers again with {again}, {where}, or calibrate this judge: "
                    f"`{HOW_TO_CALIBRATE}`"
                )
            what, flags = differ
            fix = (
                "check the answers again"
                + (" at the calibration's threshold" if "support_threshold is" in what else "")
                + f" with {again}"
                + (f", giving {' '.join(flags)}" if flags else "")
                + f", {where}"
            )
            return f"another judge setting: {what}; {fix}"
        return None

    def judge_config(self, config: JudgeConfig, flag: str = "--set") -> JudgeConfig:
        """`config` at this calibration's threshold; BadInput naming the verdict setting that
        differs and the `flag` (`--set`, or `--judge-set` for audit) that fixes it (checked
        before any engine starts)."""
        at = config.model_copy(update={"support_threshold": self.data["threshold"]})
        dumped = at.model_dump(mode="json")
        if (
            judge_fingerprint(None, dumped, None)["verdict_sha256"]
            != (self.data["judge"]["fingerprint"]["verdict_sha256"])
        ):
            differ = self._settings_differ(verdict_settings(dumped), flag)
            what, flags = differ or ("(prompt, model, chunks per claim, ...)", [])
            raise BadInput(
                f"{self.label}: calibrated for other judge settings than {config.name}'s: "
                f"{what}; "
                + (f"give {' '.join(flags)}, or " if flags else "")
                + f"calibrate this judge: `{HOW_TO_CALIBRATE}`"
            )
        return at

    def provenance(self) -> dict[str, Any]:
        """What a summary and a report say about the calibration applied."""
        answer = self.data["answer_level"]
        claim = self.data.get("claim_level") if self.claim_accuracy is not None else None
        return {
            "name": self.label,
            "path": str(self.path),
            "labels": self.data["labels"],
            "answers": self.data["answers"],
            "hallucinated": self.data["hallucinated"],
            "questions": self.data.get("questions"),
            "threshold": self.data["threshold"],
            "domain": self.domain,
            "out_of_fold": self.data.get("out_of_fold"),
            "answer_level": {k: answer[k] for k in _SHOWN if k in answer},
            "claim_level": None if claim is None else {k: claim[k] for k in _SHOWN if k in claim},
            "claim_level_absent": None
            if claim is not None
            else self.data.get("claim_level_absent")
            or "the labels give no claims of both classes (hallucinated and clean)",
        }


_SHOWN = (
    "sensitivity",
    "sensitivity_interval",
    "specificity",
    "specificity_interval",
    "balanced_accuracy",
    "auroc",
    "claims",
    "informative",  # sensitivity + specificity > 1: a correction exists
)


class _Fingerprint(ArtifactPart):
    verdict_sha256: str
    model: str | None = None
    backend: str | None = None
    dtype: str | None = None
    verdict_logic: str | None = None


class _CalibratedJudge(ArtifactPart):
    fingerprint: _Fingerprint
    verdict_settings: dict[str, Any] | None = None


class _Labels(ArtifactPart):
    path: str
    sha256: str


class _Level(ArtifactPart):
    """The judge's agreement at one level: counts, and the figures shown from them."""

    true_positives: int = Field(ge=0)
    positives: int = Field(ge=0)
    true_negatives: int = Field(ge=0)
    negatives: int = Field(ge=0)
    sensitivity: float | None = None
    specificity: float | None = None
    sensitivity_interval: list[float] | None = Field(None, min_length=2, max_length=2)
    specificity_interval: list[float] | None = Field(None, min_length=2, max_length=2)


class CalibrationFile(ArtifactPart):
    """calibration.json as `load_calibration` reads it (schema version 2)."""

    schema_version: int
    judge: _CalibratedJudge
    labels: _Labels
    answers: int = Field(ge=0)
    hallucinated: int = Field(ge=0)
    questions: int | None = None
    threshold: float = Field(ge=0, le=1)
    domain: str | None = None
    out_of_fold: dict[str, Any]
    answer_level: _Level
    claim_level: _Level | None = None


def load_calibration(path: Path, name: str = "") -> Calibration:
    """A calibration from CAL_DIR (or its calibration.json); BadInput in one line otherwise
    (an in-sample calibration of an earlier auditor included)."""
    file = path / CALIBRATION if path.is_dir() else path
    if not file.exists():
        raise BadInput(f"{file}: no such calibration; make one with `{HOW_TO_CALIBRATE}`")
    try:
        # a FIFO or a device refused from its stat, never read
        data = json.loads(read_regular_file(file).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BadInput(
            f"{file}: not a readable calibration ({exc}); run auditor calibrate again"
        ) from exc
    if isinstance(data, dict) and data.get("schema_version") == 1:
        raise BadInput(
            f"{file}: an in-sample calibration of an earlier auditor (sensitivity and "
            "specificity measured at a threshold chosen on the same answers); make it again "
            f"with `{HOW_TO_CALIBRATE}` (shipped ones: bench/agreement.py --write-calibration)"
        )
    if not isinstance(data, dict) or data.get("schema_version") != CALIBRATION_SCHEMA_VERSION:
        raise BadInput(
            f"{file}: not a calibration of this auditor (schema); run auditor calibrate again"
        )
    if (
        not isinstance(data.get("judge"), dict)
        or "fingerprint" not in data["judge"]
        or ("out_of_fold" not in data)
    ):
        raise BadInput(
            f"{file}: calibration without a judge fingerprint or out-of-fold figures; "
            "run auditor calibrate again"
        )
    try:
        CalibrationFile.model_validate(data)
    except ValidationError as exc:
        problem = format_validation_error(str(file), exc)
        raise BadInput(
            f"{problem}; the file was edited by hand? run auditor calibrate again"
        ) from exc
    return Calibration(file, data, name)


def shipped_calibrations() -> dict[str, Path]:
    """{name: file} of the calibrations that ship with the auditor (auditor/calibrations/
    JUDGE.DTYPE.json: the default judge's in bfloat16 and in float32, made from RAGTruth QA dev
    by `auditor calibrate`). None applies by itself: `--calibration NAME` names one, and
    `--calibration JUDGE` the one for the dtype the judge runs in here."""
    from importlib.resources import files

    return {
        entry.name.removesuffix(".json"): Path(str(entry))
        for entry in sorted(
            files("auditor").joinpath("calibrations").iterdir(), key=lambda e: e.name
        )
        if entry.name.endswith(".json")
    }


def judges_shipped() -> list[str]:
    """The judges with a shipped calibration (NAME of auditor/calibrations/NAME.DTYPE.json)."""
    return sorted({name.rsplit(".", 1)[0] for name in shipped_calibrations() if "." in name})


def shipped_for_this_machine(judge: str) -> Path | None:
    """`--calibration JUDGE`: the calibration shipped for JUDGE in the dtype its engine runs in
    here (bfloat16, or float32 on a CPU without native bfloat16); None if none ships."""
    if judge not in judges_shipped():
        return None
    file = shipped_calibration_file(judge, engine_dtype("bfloat16"))
    return file if file.is_file() else None


def resolve_calibration(given: str | Path) -> Calibration:
    """`--calibration NAME_OR_PATH`: a calibration dir or file, else a shipped calibration by
    name; BadInput in one line listing the shipped names otherwise."""
    text = str(given)
    path = Path(text)
    if path.exists():
        return load_calibration(path, text)
    shipped = shipped_calibrations()
    if text in shipped:
        return load_calibration(shipped[text], text)
    here = shipped_for_this_machine(text)
    if here is not None:
        return load_calibration(here, text)
    names = ", ".join([*judges_shipped(), *shipped]) or "none"
    raise BadInput(
        f"{text}: no such calibration (no such dir or file, nor a shipped one: {names}); "
        f"make one on your own labels with `{HOW_TO_CALIBRATE}`"
    )
