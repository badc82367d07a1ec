"""`check_run`: every claim of every answer verified against its sources -> checks.jsonl.

This module owns the run dir: which answers are left, the judge and embedder it starts, the
check.json manifest, and resuming. The claim check itself, step by step, is `pipeline`
(list claims -> keep those the answer makes -> choose evidence -> ask the judge -> decide).
Unparseable judge output is re-asked a bounded number of times, then recorded: an affected
claim is `unverifiable`, never NaN, never dropped. checks.jsonl grows by one batch at a time
and an interrupted check resumes where it stopped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from auditor.config import (
    EXAMPLE_SETTINGS,
    EmbedderConfig,
    JudgeConfig,
    config_sha256,
    without_engine_only,
)
from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.ingest import embed as embedders
from auditor.store import CHECK_MANIFEST, CHECKS, RecordWriter, read_check_manifest, read_checks
from auditor.verify import judges
from auditor.verify.answers import AnswerItem, import_answers, items_from_run
from auditor.verify.asker import OnStageCalls
from auditor.verify.base import Judge
from auditor.verify.examples import ClaimMemory, ExampleBook, MemoryWeights, references
from auditor.verify.kb import KnowledgeBase, kb_identity
from auditor.verify.pipeline import check_batch
from auditor.versions import package_versions

__all__ = [
    "CHECKS",
    "AnswerItem",
    "BatchRunner",
    "CheckSummary",
    "OnStageCalls",
    "OpenRunner",
    "check_items",
    "check_run",
    "import_answers",
    "items_from_run",
    "refuse_other_check",
    "refuse_unresumable",
]

CHECK_SCHEMA_VERSION = 1
# The verdict logic's version (prompts, claim rules, decision): recorded with every check and
# part of a calibration's fingerprint. Bump it whenever a change can move a verdict or
# p_supported, and re-make auditor/calibrations/ (bench/agreement.py --write-calibration).
VERDICT_LOGIC = "2026-12-05.2"  # + listed facts checked against their answer; kinds by subject


@dataclass
class CheckSummary:
    """Totals printed after a check."""

    out_dir: Path
    answers: int = 0
    claims: int = 0
    supported: int = 0
    unsupported: int = 0
    contradicted: int = 0
    unverifiable: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    judge_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_cached_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_seconds: float = 0.0
    skipped: int = 0
    listed_claims: int = 0  # claims the judge listed and the premise check saw
    listing_errors: int = 0  # of them, claims the answer does not make (dropped)

    @property
    def hallucination_rate(self) -> float | None:
        judged = self.supported + self.unsupported + self.contradicted
        return (self.unsupported + self.contradicted) / judged if judged else None

    @property
    def judge_failed_throughout(self) -> bool:
        """No claim got a verdict and the judge is why (not: nothing needed checking)."""
        judged = self.supported + self.unsupported + self.contradicted
        return judged == 0 and self.unverifiable + self.outcomes.get("judge_failed", 0) > 0


def _same_judge(previous: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether checks made by `previous` may be resumed by `current`: the same settings, engine
    speed settings (CPU threads, KV cache size, ...) aside."""
    if previous.get("sha256") == current["sha256"]:
        return True
    if "config" not in previous:
        return False
    return _judging(previous["config"]) == _judging(current["config"])


def _judging(config: dict[str, Any]) -> dict[str, Any]:
    """A dumped judge config as far as resuming goes: engine speed settings aside, the
    example settings only where examples were given, and context precision's verdict as its
    default where it is not recorded (checks made before these settings existed resume)."""
    # a check from before the setting rated chunks as its default does
    kept = {"context_precision_verdict": "reason"} | without_engine_only(config)
    if kept.get("examples") is None:
        kept = {k: v for k, v in kept.items() if k not in ("examples", *EXAMPLE_SETTINGS)}
    return kept


class BatchRunner(Protocol):
    """Where batches are checked: this process (`LocalBatches`) or a Ray cluster
    (`auditor.scale.checking.RayCheck`)."""

    def identity(self) -> dict[str, Any] | None: ...

    def record(self) -> dict[str, Any] | None: ...

    def batches(self, todo: list[AnswerItem]) -> Iterator[list[dict[str, Any]]]: ...


# Opens a runner for the answers left to check, with the knowledge base's identity to record
# (None: not checked against it); the runner's engines are freed when the context ends.
OpenRunner = Callable[
    [list[AnswerItem]], AbstractContextManager[tuple[BatchRunner, dict[str, Any] | None]]
]


@dataclass
class LocalBatches:
    """The batches checked one after another by a judge in this process."""

    config: JudgeConfig
    judge: Judge
    embed: Callable[[list[str]], Any]
    on_calls: OnStageCalls | None = None
    kb: KnowledgeBase | None = None

    def identity(self) -> dict[str, Any] | None:
        return self.judge.identity()

    def record(self) -> dict[str, Any] | None:
        return None  # this process

    def batches(self, todo: list[AnswerItem]) -> Iterator[list[dict[str, Any]]]:
        size = self.config.answers_per_batch
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            yield check_batch(batch, self.config, self.judge, self.embed, self.on_calls, self.kb)


def check_items(
    items: list[AnswerItem],
    out_dir: Path,
    config: JudgeConfig,
    judge: Judge,
    embed: Callable[[list[str]], Any],
    *,
    on_batch: Callable[[int], None] | None = None,
    on_calls: OnStageCalls | None = None,
    kb: KnowledgeBase | None = None,
    memory: ClaimMemory | None = None,
) -> CheckSummary:
    """Check every item not yet in `out_dir/checks.jsonl` with `judge`, batch by batch."""
    kb_id = kb.identity() if kb is not None else None
    runner = LocalBatches(config, judge, embed, on_calls, kb)
    return check_into(items, out_dir, config, runner, on_batch=on_batch, kb_id=kb_id, memory=memory)


def check_into(
    items: list[AnswerItem],
    out_dir: Path,
    config: JudgeConfig,
    runner: BatchRunner,
    *,
    on_batch: Callable[[int], None] | None = None,
    kb_id: dict[str, Any] | None = None,
    memory: ClaimMemory | None = None,
) -> CheckSummary:
    """Check every item not yet in `out_dir/checks.jsonl` and append the rows `runner` yields,
    each id once (the commit log a re-run resumes from); with `memory`, each row's claims
    moved by the labelled examples of its question before it is written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {row["id"] for row in read_checks(out_dir, repair=True)}
    todo = [item for item in items if item.id not in done]
    manifest_path = out_dir / CHECK_MANIFEST
    manifest: dict[str, Any] = {
        "schema_version": CHECK_SCHEMA_VERSION,
        "judge": {"config": config.model_dump(mode="json"), "sha256": config_sha256(config)},
        "sources": sorted({item.sources for item in items}),
        "started_at": utc_now(),
        # this check's own id (review.check_fingerprint): kept when it resumes, new when it
        # begins anew, however close in time
        "check_id": uuid.uuid4().hex,
    }
    if kb_id is not None and any(item.sources != "returned" for item in items):
        manifest["kb"] = kb_id
    if memory is not None:
        manifest["judge"]["examples"] = memory.book.provenance() | {
            "answers_matched": memory.matched(items),
            "weights": memory.weights.to_json(),
        }
    previous = read_check_manifest(out_dir)
    if previous is not None:
        if done and not _same_judge(previous.get("judge", {}), manifest["judge"]):
            raise BadInput(
                f"{manifest_path}: checks here were made by another judge configuration; "
                f"remove {out_dir / CHECKS} to re-judge, or check into another dir"
            )
        if done:
            _refuse_other_sources(out_dir, items)
            _refuse_other_examples(out_dir, previous, manifest)
        if done:  # a resumed check; one begun anew has new claims, and a new fingerprint
            manifest["started_at"] = previous.get("started_at", manifest["started_at"])
            manifest["check_id"] = previous.get("check_id", manifest["check_id"])
        if "identity" in previous.get("judge", {}):  # until a cluster's actors report theirs
            manifest["judge"]["identity"] = previous["judge"]["identity"]
    identity = runner.identity()
    if identity is not None:
        manifest["judge"]["identity"] = identity
    manifest["judge"]["verdict_logic"] = VERDICT_LOGIC
    manifest["packages"] = package_versions()
    manifest["status"] = "running"
    write_json_atomic(manifest_path, manifest)

    summary = CheckSummary(out_dir=out_dir, skipped=len(items) - len(todo))
    written = set(done)
    by_id = {item.id: item for item in todo}
    with RecordWriter(out_dir, CHECKS) as writer:
        for rows in runner.batches(todo):
            if identity is None and (identity := runner.identity()) is not None:
                manifest["judge"]["identity"] = identity
                write_json_atomic(manifest_path, manifest)
            for row in rows:
                if row["id"] in written:  # a batch retried after its rows arrived: once only
                    continue
                if memory is not None:
                    memory.apply(row, by_id[row["id"]])
                writer.write(row)
                written.add(row["id"])
                _count(summary, row)
            if on_batch:
                on_batch(len(rows))
    rows_now = read_checks(out_dir)
    for row in rows_now:
        if row["id"] in done:
            _count(summary, row)
    manifest |= {"status": "complete", "finished_at": utc_now()}
    # what checks.jsonl holds: a report holds the file to it (run_shapes.check_totals)
    manifest["totals"] = {
        "answers": len(rows_now),
        "claims": sum(len(row.get("claims") or []) for row in rows_now),
    }
    if (scale := runner.record()) is not None:
        manifest["scale"] = scale
    if config.premise_check and config.claims == "listed" and "faithfulness" in config.metrics:
        # listed claims the answer does not make, dropped and checked as written instead
        manifest["listing"] = {
            "listed_claims": summary.listed_claims,
            "listing_errors": summary.listing_errors,
        }
    write_json_atomic(manifest_path, manifest)
    return summary


def check_run(
    targets: Sequence[tuple[Path, list[AnswerItem]]],
    config: JudgeConfig,
    *,
    judge_factory: Callable[[JudgeConfig], Judge] | None = None,
    embed: Callable[[list[str]], Any] | None = None,
    on_stage: Callable[[str], None] = lambda message: None,
    on_check_start: Callable[[str, int], None] = lambda name, total: None,
    on_batch: Callable[[int], None] | None = None,
    on_calls: OnStageCalls | None = None,
    kb_index: Path | None = None,
    open_runner: OpenRunner | None = None,
    examples: ExampleBook | None = None,
) -> list[CheckSummary]:
    """Check the answers of several dirs with one embedder and one judge (`check` and `audit`).

    The embedder and the judge engine start only when some dir has answers left to check,
    and the engine is freed at the end, whatever happens (`judge_factory` may hand over an
    engine that is already up: the judge's close frees it). With `open_runner` the batches
    are checked where it says instead (`auditor.scale.checking.ray_runner`: judge actors on
    a Ray cluster); this module knows nothing of where. With `examples`, each answer's
    claims are moved by its question's labelled answers as its row is written, here, whoever
    checked it (`examples.ClaimMemory`). One summary per target, in order.
    """
    for out_dir, items in targets:
        refuse_unresumable(out_dir, items, kb_index)
        refuse_other_check(out_dir, config, examples)
    pending = [(d, items) for d, items in targets if {i.id for i in items} - _checked_ids(d)]
    summaries: dict[Path, CheckSummary] = {}
    memory = None
    if pending and examples is not None:
        if embed is None:
            on_stage("loading the embedder (claim-to-chunk similarity, examples)")
            embed = embedders.load_embedder(EmbedderConfig()).embed
        weights = MemoryWeights(**config.memory.model_dump())  # the same fields
        if config.examples_in == "prompt":
            # recorded, moves nothing: decides answers with examples at the prompt's threshold
            weights = MemoryWeights(0.0, 0.0, 0.0, config.examples_prompt_threshold)
        memory = ClaimMemory(examples, weights, config.support_threshold, embed)
        if config.examples_in == "prompt":
            for _, items in pending:
                for item in items:
                    found = examples.for_answer(
                        item.id, item.question, item.source_id, item.run, item.answer
                    )
                    item.reviewed = tuple(references(found))
    if pending and open_runner is not None:
        with open_runner([item for _, items in pending for item in items]) as (runner, kb_id):
            for out_dir, items in pending:
                on_check_start(out_dir.name, len(items))
                summaries[out_dir] = check_into(
                    items, out_dir, config, runner, on_batch=on_batch, kb_id=kb_id, memory=memory
                )
    elif pending:
        if embed is None:
            on_stage("loading the embedder (claim-to-chunk similarity)")
            embed = embedders.load_embedder(EmbedderConfig()).embed
        if judge_factory is None:
            judge_factory = judges.make_judge
        kb = None
        if kb_index is not None and any(i.sources != "returned" for _, its in pending for i in its):
            on_stage(f"opening the knowledge base {kb_index}")
            kb = KnowledgeBase(kb_index)
        on_stage(f"starting judge {config.name}")
        judge = judge_factory(config)
        try:
            for out_dir, items in pending:
                on_check_start(out_dir.name, len(items))
                summaries[out_dir] = check_items(
                    items,
                    out_dir,
                    config,
                    judge,
                    embed,
                    on_batch=on_batch,
                    on_calls=on_calls,
                    kb=kb,
                    memory=memory,
                )
        finally:
            judge.close()
    for out_dir, items in targets:
        if out_dir not in summaries:
            summary = summaries[out_dir] = CheckSummary(out_dir=out_dir, skipped=len(items))
            wanted = {item.id for item in items}
            for row in read_checks(out_dir):
                if row["id"] in wanted:
                    _count(summary, row)
    return [summaries[out_dir] for out_dir, _ in targets]


def refuse_unresumable(out_dir: Path, items: list[AnswerItem], kb_index: Path | None) -> None:
    """BadInput when checking `items` into `out_dir` cannot go on (read only, before any work):
    stored checks made against other sources or another knowledge base, or the knowledge base
    not given."""
    _refuse_other_sources(out_dir, items)
    uses_kb = any(item.sources != "returned" for item in items)
    if kb_index is None and uses_kb:
        raise BadInput(f"{out_dir}: checking against the knowledge base needs --index KB_DIR")
    if kb_index is not None and uses_kb:
        _refuse_other_kb(out_dir, kb_index)


def refuse_other_check(out_dir: Path, config: JudgeConfig, examples: ExampleBook | None) -> None:
    """BadInput, before any engine starts, when `out_dir` holds checks made by another judge
    configuration (a calibration's threshold included) or with other examples (or none): they
    are not this check's to resume, and printing them as this check's would show old verdicts
    as new. The message names both and the command that re-checks into a new run dir."""
    previous = read_check_manifest(out_dir)
    if previous is None or not _checked_ids(out_dir):
        return
    judge = previous.get("judge", {})
    current = {"config": config.model_dump(mode="json"), "sha256": config_sha256(config)}
    before = (judge.get("examples") or {}).get("sha256")
    now = None if examples is None else examples.sha256
    if _same_judge(judge, current) and before == now:
        return

    def named(sha: Any, examples_sha: Any) -> str:
        shown = f"judge {str(sha)[:12]}"
        return shown + (f" with examples {str(examples_sha)[:12]}" if examples_sha else "")

    raise BadInput(
        f"{out_dir / CHECK_MANIFEST}: its answers were checked by {named(judge.get('sha256'), before)}"
        f", not {named(current['sha256'], now)} (another judge setting, calibration or examples); "
        "re-check into a new run dir that shares its records: add --out NEW_DIR "
        f"(or remove {out_dir / CHECKS} to re-check here)"
    )


def _refuse_other_examples(
    out_dir: Path, previous: dict[str, Any], manifest: dict[str, Any]
) -> None:
    """Checks made with other examples (or none) are not this check's to resume."""
    before = (previous.get("judge", {}).get("examples") or {}).get("sha256")
    now = (manifest["judge"].get("examples") or {}).get("sha256")
    if before != now:
        said = {None: "no examples"}
        raise BadInput(
            f"{out_dir / CHECK_MANIFEST}: checks here were made with "
            f"{said.get(before, 'examples ' + str(before)[:12])}, not "
            f"{said.get(now, 'examples ' + str(now)[:12])}; remove {out_dir / CHECKS} to "
            "re-check, or check into another dir"
        )


def _refuse_other_sources(out_dir: Path, items: list[AnswerItem]) -> None:
    """Stored checks made against other sources are not this check's: refuse to reuse them."""
    manifest_path = out_dir / CHECK_MANIFEST
    manifest = read_check_manifest(out_dir)
    if manifest is None or not _checked_ids(out_dir):
        return
    previous = manifest.get("sources", ["returned"])
    wanted = sorted({item.sources for item in items})
    if previous != wanted:
        raise BadInput(
            f"{manifest_path}: checks here were made against sources {'/'.join(previous)}, "
            f"not {'/'.join(wanted)}; remove {out_dir / CHECKS} to re-check, or check into "
            "another dir"
        )


def _refuse_other_kb(out_dir: Path, kb_index: Path) -> None:
    """Checks made against another knowledge base (another index manifest) are not this
    check's to resume: refuse, naming both."""
    previous = (read_check_manifest(out_dir) or {}).get("kb")
    if previous is None or not _checked_ids(out_dir):
        return
    current = kb_identity(kb_index, None)
    if previous.get("manifest_sha256") != current["manifest_sha256"]:
        raise BadInput(
            f"{out_dir / CHECK_MANIFEST}: checks here were made against the knowledge base "
            f"{previous.get('path')} (manifest {str(previous.get('manifest_sha256'))[:12]}), "
            f"not {kb_index} (manifest {current['manifest_sha256'][:12]}); give that --index, "
            f"or remove {out_dir / CHECKS} to re-check against this one"
        )


def _checked_ids(out_dir: Path) -> set[str]:
    path = out_dir / CHECKS
    return {row["id"] for row in read_checks(out_dir, repair=True)} if path.exists() else set()


def _count(summary: CheckSummary, row: dict[str, Any]) -> None:
    summary.answers += 1
    summary.outcomes[row["outcome"]] = summary.outcomes.get(row["outcome"], 0) + 1
    for claim in row["claims"]:
        summary.claims += 1
        setattr(summary, claim["verdict"], getattr(summary, claim["verdict"]) + 1)
    judge = row["judge"]
    summary.judge_calls += judge["calls"]
    summary.judge_prompt_tokens += judge["prompt_tokens"]
    summary.judge_cached_tokens += judge.get("cached_tokens", 0)
    summary.judge_completion_tokens += judge["completion_tokens"]
    summary.judge_seconds += judge["seconds"]
    summary.listed_claims += row.get("listed_claims", 0)
    summary.listing_errors += len(row.get("listing_errors", []))
