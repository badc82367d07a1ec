"""Measure more views of each claim on answers already checked (no re-judging of the rest).

    .venv/bin/python bench/views.py RUN_DIR [--views V,V] [--set KEY=VALUE ...]  # judge, once
    .venv/bin/python bench/views.py RT_RUN --score [--contrast RUN]  # score them, seconds

For every fact claim in RUN_DIR/checks.jsonl, asks the judge's label question again against
other passages (`--views`, default joined,null):
- joined: against all the answer's chunks at once, joined in rank order (a claim that fuses
  facts of two chunks is stated by neither alone; the chunks are a prefix shared by all the
  answer's claims, so each claim computes only its own tokens);
- null: against an empty passage (what the judge believes of the claim with no evidence:
  a claim it approves from its own knowledge scores high here too; a PMI-style correction);
- focus3 / focus6: against the 3 / 6 sentences (or lines) of its checked chunks closest to
  the claim (MiniLM), in reading order: a small judge reads a short premise better than a
  chunk of tables and lists (SummaC and MiniCheck split premises for the same reason);
- blank: once per checked chunk, a content-free claim ("N/A") against it: the judge's label
  bias on that chunk, divided out of the stored per-chunk probabilities ("contextual
  calibration", Zhao et al. 2021).
Writes RUN_DIR/views.json (views already there are kept). With --score, prints for the stored per-chunk probability and for
combinations with the views, side by side on the same claims: RAGTruth QA dev agreement
(5-fold CV by question) and the contrast set's shares flagged at the threshold chosen on all
RAGTruth answers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import EmbedderConfig, load_judge, parse_set_option
from auditor.store import read_jsonl
from auditor.verify.answers import items_from_run
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.claims import sentence_spans
from auditor.verify.entailment import entailment_prompt, label_probabilities
from auditor.verify.figures import missing_figures
from bench.quote_pass import judge_once

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
NULL_PASSAGE = "(no passage)"
BLANK_CLAIM = "N/A"
EXPLAIN = """Read the passage and the claim. In one short sentence, say what the passage states \
about the claim's subject, with its exact figures, names and conditions; or say that the passage \
does not mention it. Reply as JSON: {"explanation": "..."}"""
EXPLAIN_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string", "maxLength": 240}},
    "required": ["explanation"],
    "additionalProperties": False,
}


def explain_prompt(passage: str, claim: str) -> str:
    """Stage 1 of the reasoned view: the judge's own reading of the passage on the claim."""
    return f"{EXPLAIN}\n\nPassage:\n{passage.strip()}\n\nClaim: {claim.strip()}"


def reasoned_prompt(passage: str, claim: str, explanation: str) -> str:
    """Stage 2: the label question with that reading written before the answer."""
    base = entailment_prompt(passage, claim)
    head = base[: -len("Answer:")]
    return f"{head}What the passage says: {explanation.strip()}\nAnswer:"


def best_chunk(claim: dict[str, Any]) -> str | None:
    """The claim's best-judged chunk that no figure guard vetoes (None: all vetoed)."""
    usable = [
        j
        for j in claim["judgements"]
        if not j["vetoed"] and not j.get("misbound") and j["probabilities"] is not None
    ]
    if not usable:
        return None
    return str(max(usable, key=lambda j: j["probabilities"]["true"])["chunk"])


FOCUS = {"focus3": 3, "focus6": 6}


def focus_premise(
    claim: str, chunks: list[str], embed: Callable[[list[str]], Any], top: int
) -> str:
    """The `top` sentences (lines) of the chunks closest to the claim, in reading order."""
    sentences = [
        (index, start, chunk[start:end])
        for index, chunk in enumerate(chunks)
        for start, end in sentence_spans(chunk)
        if len(chunk[start:end].split()) >= 2
    ]
    if len(sentences) <= top:
        return "\n".join(text for _, _, text in sentences)
    vectors = embed([claim] + [text for _, _, text in sentences])
    order = (-(vectors[1:] @ vectors[0])).argsort(kind="stable")[:top]
    chosen = sorted(sentences[int(i)] for i in order)
    return "\n".join(text for _, _, text in chosen)


def judge_views(run_dir: Path, set_items: list[str], views: list[str]) -> None:
    target = run_dir / "views.json"
    results: dict[str, Any] = {"seconds": 0.0, "answers": {}, "chunks": {}, "cost": {}}
    if target.exists():
        results = {**results, **json.loads(target.read_text())}
    todo = [v for v in views if v not in results["cost"]]
    if not todo:
        print(f"{target} has {', '.join(views)}; nothing to judge")
        return
    config = load_judge(None, dict(parse_set_option(s) for s in set_items))
    embed = None
    if any(v in FOCUS or v == "focusc" for v in todo):
        from auditor.ingest.embed import load_embedder

        embed = load_embedder(EmbedderConfig()).embed
    items = {item.id: item for item in items_from_run(run_dir)}
    calls: list[JudgeCall] = []
    premises: dict[CallKey, str] = {}
    explain: list[JudgeCall] = []  # the reasoned view's first stage
    texts: dict[CallKey, str] = {}
    for row in read_jsonl(run_dir / "checks.jsonl"):
        item = items[row["id"]]
        chunks = dict(item.chunks)
        position = {chunk_id: i for i, (chunk_id, _) in enumerate(item.chunks)}
        joined = "\n\n".join(text for _, text in item.chunks)
        blanks: set[str] = set()
        for index, claim in enumerate(row["claims"]):
            if claim["kind"] != "fact" or claim["verdict"] == "unverifiable":
                continue
            checked = [chunks[c] for c in claim["checked_chunks"] if c in chunks]
            for view in todo:
                if view == "blank":
                    for chunk_id in claim["checked_chunks"]:
                        if chunk_id in blanks or chunk_id not in chunks:
                            continue
                        blanks.add(chunk_id)
                        key = CallKey(view, row["id"], (position[chunk_id],))
                        prompt = entailment_prompt(chunks[chunk_id], BLANK_CLAIM)
                        calls.append(JudgeCall(key, prompt, None, 1, 20))
                    continue
                if view == "reasoned":
                    chunk_id = best_chunk(claim)
                    if chunk_id is not None:
                        key = CallKey(view, row["id"], (index, position[chunk_id]))
                        premises[key] = chunks[chunk_id]
                        explain.append(
                            JudgeCall(
                                key,
                                explain_prompt(chunks[chunk_id], claim["text"]),
                                EXPLAIN_SCHEMA,
                                120,
                            )
                        )
                        texts[key] = claim["text"]
                    continue
                if view == "focusc":
                    # per checked chunk: its 3 sentences closest to the claim (no fusing of
                    # two chunks' facts); a chunk of 3 sentences or fewer is its own focus
                    assert embed is not None
                    for chunk_id in claim["checked_chunks"]:
                        if chunk_id not in chunks:
                            continue
                        passage = focus_premise(claim["text"], [chunks[chunk_id]], embed, 3)
                        if len(sentence_spans(chunks[chunk_id])) <= 3:
                            continue
                        key = CallKey(view, row["id"], (index, position[chunk_id]))
                        premises[key] = passage
                        prompt = entailment_prompt(passage, claim["text"])
                        calls.append(JudgeCall(key, prompt, None, 1, 20))
                    continue
                if view in FOCUS:
                    assert embed is not None
                    passage = focus_premise(claim["text"], checked, embed, FOCUS[view])
                else:
                    passage = joined if view == "joined" else NULL_PASSAGE
                key = CallKey(view, row["id"], (index,))
                premises[key] = passage
                calls.append(JudgeCall(key, entailment_prompt(passage, claim["text"]), None, 1, 20))
    # calls of one answer next to each other: its chunks are computed once
    calls.sort(key=lambda c: (c.key.stage, c.key.item, str(c.key.part)))
    if explain:
        calls, seconds = _reasoned_calls(config, explain, premises, texts, calls, results)
        results["seconds"] += seconds
    replies, seconds = judge_once(config, calls)
    results["seconds"] += seconds
    for call, reply in zip(calls, replies, strict=True):
        probabilities, _ = label_probabilities(reply.top_logprobs, reply.text)
        cost = results["cost"].setdefault(call.key.stage, {"calls": 0, "prompt": 0, "cached": 0})
        cost["calls"] += 1
        cost["prompt"] += reply.prompt_tokens
        cost["cached"] += reply.cached_tokens
        if call.key.stage == "blank":
            chunk_id = items[call.key.item].chunks[call.key.part[0]][0]
            results["chunks"].setdefault(call.key.item, {})[chunk_id] = probabilities
        else:
            answer = results["answers"].setdefault(call.key.item, {})
            slot = answer.setdefault(str(call.key.part[0]), {})
            if call.key.stage == "reasoned":
                chunk_id = items[call.key.item].chunks[call.key.part[1]][0]
                slot["reasoned"] = {"chunk": chunk_id, "probabilities": probabilities}
                continue
            if call.key.stage == "focusc":
                chunk_id = items[call.key.item].chunks[call.key.part[1]][0]
                slot.setdefault("focusc", {})[chunk_id] = probabilities
                slot.setdefault("focusc_premise", {})[chunk_id] = premises[call.key]
                continue
            slot[call.key.stage] = probabilities
            if call.key in premises and call.key.stage in FOCUS:
                slot[call.key.stage + "_premise"] = premises[call.key]
    target.write_text(json.dumps(results), encoding="utf-8")
    print(f"{len(calls)} view calls in {seconds:.0f} s -> {target}")
    for stage in todo:
        cost = results["cost"].get(stage, {"calls": 0, "prompt": 0, "cached": 0})
        n = max(1, cost["calls"])
        print(
            f"  {stage}: {cost['calls']} calls, per call {cost['prompt'] / n:.0f} prompt tokens, "
            f"{(cost['prompt'] - cost['cached']) / n:.0f} computed"
        )


def _reasoned_calls(
    config: Any,
    explain: list[JudgeCall],
    premises: dict[CallKey, str],
    texts: dict[CallKey, str],
    calls: list[JudgeCall],
    results: dict[str, Any],
) -> tuple[list[JudgeCall], float]:
    """Run the reasoned view's first stage; its label calls join the others."""
    replies, seconds = judge_once(config, explain)
    cost = results["cost"].setdefault("explain", {"calls": 0, "prompt": 0, "cached": 0})
    completion = 0
    for call, reply in zip(explain, replies, strict=True):
        cost["calls"] += 1
        cost["prompt"] += reply.prompt_tokens
        cost["cached"] += reply.cached_tokens
        completion += reply.completion_tokens
        try:
            explanation = str(json.loads(reply.text)["explanation"])
        except (ValueError, KeyError, TypeError):
            explanation = ""
        slot = results.setdefault("explanations", {}).setdefault(call.key.item, {})
        slot[str(call.key.part[0])] = explanation
        prompt = reasoned_prompt(premises[call.key], texts[call.key], explanation)
        calls.append(JudgeCall(call.key, prompt, None, 1, 20))
    cost["completion"] = completion
    print(f"explain: {len(explain)} calls in {seconds:.0f} s, {completion} completion tokens")
    return calls, seconds


# a claim's score from its views: "chunk" (the stored per-chunk p, always there) and any of
# joined, null, focus3, focus6, cc (per-chunk p with the blank's label bias divided out)
Views = dict[str, float | None]
Combiner = Callable[[Views], float]


def _with(name: str, f: Callable[[float, float], float]) -> Combiner:
    """f(chunk, view), or the chunk's value where the view is missing."""
    return lambda v: v["chunk"] if v.get(name) is None else f(v["chunk"], v[name])  # type: ignore[arg-type]


def _mean(c: float, x: float) -> float:
    return (c + x) / 2


COMBINERS: dict[str, Combiner] = {
    "chunk (today)": lambda v: v["chunk"],  # type: ignore[return-value]
    "joined": _with("joined", lambda c, x: x),
    "max(chunk, joined)": _with("joined", max),
    "mean(chunk, joined)": _with("joined", _mean),
    "chunk - 0.5 null": _with("null", lambda c, x: c - 0.5 * x),
    "focus3": _with("focus3", lambda c, x: x),
    "max(chunk, focus3)": _with("focus3", max),
    "mean(chunk, focus3)": _with("focus3", _mean),
    "focus6": _with("focus6", lambda c, x: x),
    "max(chunk, focus6)": _with("focus6", max),
    "mean(chunk, focus6)": _with("focus6", _mean),
    "mean(f3, f6)": lambda v: (
        v["chunk"]
        if v.get("focus3") is None or v.get("focus6") is None  # type: ignore[return-value]
        else (v["focus3"] + v["focus6"]) / 2  # type: ignore[operator]
    ),
    "mean(chunk, f3, f6)": lambda v: (
        v["chunk"]
        if v.get("focus3") is None or v.get("focus6") is None  # type: ignore[return-value]
        else (v["chunk"] + v["focus3"] + v["focus6"]) / 3  # type: ignore[operator]
    ),
    "focusc: max(chunk, its focus3)": _with("focusc", lambda c, x: x),
    "reasoned (best chunk)": _with("reasoned", lambda c, x: x),
    "mean(chunk, reasoned)": _with("reasoned", _mean),
    "geo(chunk, reasoned)": _with("reasoned", lambda c, x: (c * x) ** 0.5),
    "chunk x (1 - reasoned false)": _with("reasoned_false", lambda c, x: c * (1 - x)),
    "cc": _with("cc", lambda c, x: x),
    "mean(chunk, cc)": _with("cc", _mean),
    "mean(cc, focus6)": lambda v: (
        v["chunk"]
        if v.get("cc") is None or v.get("focus6") is None  # type: ignore[return-value]
        else (v["cc"] + v["focus6"]) / 2  # type: ignore[operator]
    ),
}


def _calibrated(probabilities: dict[str, float], bias: dict[str, float] | None) -> float:
    """p(true) with the chunk's content-free label bias divided out, renormalised."""
    if bias is None:
        return probabilities["true"]
    weights = {k: probabilities[k] / max(bias[k], 1e-4) for k in probabilities}
    return weights["true"] / max(sum(weights.values()), 1e-12)


def _focused(judgement: dict[str, Any], view: dict[str, Any], claim: str, question: str) -> float:
    """One chunk's support: the better of the chunk and its focus (3 closest sentences), each
    under the figure guards (the chunk's own, and the focus must carry the claim's figures)."""
    if judgement["vetoed"] or judgement.get("misbound"):
        return 0.0
    p_chunk = float(judgement["probabilities"]["true"])
    focus = view.get("focusc", {}).get(judgement["chunk"])
    if focus is None:
        return p_chunk  # the chunk is its own focus
    premise = view["focusc_premise"][judgement["chunk"]]
    if missing_figures(claim, premise + "\n" + question):
        return p_chunk
    return max(p_chunk, float(focus["true"]))


def answer_scores(run_dir: Path, combine: Combiner) -> dict[str, float]:
    """Per answer: the lowest claim score (abstentions by their verdict, guards kept)."""
    items = {item.id: item for item in items_from_run(run_dir)}
    stored = json.loads((run_dir / "views.json").read_text())
    views, blanks = stored["answers"], stored.get("chunks", {})
    judged = set(stored["cost"])
    scores = {}
    for row in read_jsonl(run_dir / "checks.jsonl"):
        item = items[row["id"]]
        joined = "\n\n".join(text for _, text in item.chunks)
        values = []
        for index, claim in enumerate(row["claims"]):
            if claim["verdict"] == "unverifiable":
                continue
            if claim["kind"] == "abstention":
                values.append(0.0 if claim["verdict"] == "contradicted" else 1.0)
                continue
            c = claim["p_supported"]
            if c is None:
                values.append(1.0 if claim["verdict"] == "supported" else 0.0)
                continue
            view = views.get(row["id"], {}).get(str(index), {})
            misbound = any(jd.get("misbound") for jd in claim["judgements"])
            v: Views = {"chunk": c}
            for name in ("joined", "focus3", "focus6"):
                if view.get(name) is None:
                    continue
                premise = joined if name == "joined" else view.get(name + "_premise", "")
                vetoed = missing_figures(claim["text"], premise + "\n" + item.question)
                # a chunk giving the claim's figure to another subject vetoes every view
                v[name] = 0.0 if vetoed or misbound else view[name]["true"]
            v["null"] = None if view.get("null") is None else view["null"]["true"]
            reasoned = view.get("reasoned")
            if reasoned is not None and reasoned["probabilities"] is not None:
                v["reasoned"] = float(reasoned["probabilities"]["true"])
                v["reasoned_false"] = float(reasoned["probabilities"]["false"])
            if "focusc" in judged:
                v["focusc"] = max(
                    (
                        _focused(jd, view, claim["text"], item.question)
                        for jd in claim["judgements"]
                        if jd["probabilities"] is not None
                    ),
                    default=c,
                )
            chunk_bias = blanks.get(row["id"], {})
            if chunk_bias:
                v["cc"] = max(
                    (
                        0.0
                        if jd["vetoed"] or jd.get("misbound")
                        else _calibrated(jd["probabilities"], chunk_bias.get(jd["chunk"]))
                        for jd in claim["judgements"]
                        if jd["probabilities"] is not None
                    ),
                    default=c,
                )
            values.append(combine(v))
        scores[row["id"]] = min(values, default=1.0)
    return scores


def score(ragtruth_run: Path, contrast_run: Path | None) -> None:
    """Each combiner: RAGTruth 5-fold CV, then the contrast set at the threshold it picks on all
    150 RAGTruth answers (how the shipped threshold is chosen)."""
    from auditor.verify.thresholds import agreement, auroc, best_threshold
    from bench.agreement import DEV, FOLDS, fold_of
    from bench.contrast import CONTRAST

    def labelled(path: Path) -> dict[str, Any]:
        rows = (json.loads(x) for x in path.read_text().splitlines() if x.strip())
        return {r["id"]: r for r in rows}

    gold, contrast = labelled(DEV), labelled(CONTRAST)
    for name, combine in COMBINERS.items():
        scores = answer_scores(ragtruth_run, combine)
        ids = [i for i in scores if i in gold]
        labels = {i: bool(gold[i]["hallucinated"]) for i in ids}
        area = auroc([scores[i] for i in ids], [labels[i] for i in ids]) or 0.0
        folds = {i: fold_of(str(gold[i]["source_id"])) for i in ids}
        pairs = []
        for fold in range(FOLDS):
            train = [i for i in ids if folds[i] != fold]
            t = best_threshold([scores[i] for i in train], [labels[i] for i in train])
            pairs += [(labels[i], scores[i] < t) for i in ids if folds[i] == fold]
        a = agreement(pairs)
        t_all = best_threshold([scores[i] for i in ids], [labels[i] for i in ids])
        line = (
            f"{name:22s} RAGTruth CV BA {a.balanced_accuracy:.3f} "
            f"({a.interval[0]:.3f}-{a.interval[1]:.3f}) AUROC {area:.3f} "
            f"recall {a.recall:.3f} spec {a.specificity:.3f} | t {t_all:.3f}"
        )
        if contrast_run is not None:
            cs = answer_scores(contrast_run, combine)
            cids = [i for i in cs if i in contrast]
            wrong = [cs[i] < t_all for i in cids if contrast[i]["hallucinated"]]
            right = [cs[i] < t_all for i in cids if not contrast[i]["hallucinated"]]
            carea = auroc([cs[i] for i in cids], [bool(contrast[i]["hallucinated"]) for i in cids])
            line += (
                f" | contrast AUROC {carea or 0.0:.3f} wrong {sum(wrong) / max(1, len(wrong)):.3f}"
                f" correct {sum(right) / max(1, len(right)):.3f}"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument("--views", default="joined,null", help="Views to judge, comma-separated.")
    parser.add_argument("--score", action="store_true", help="RUN_DIR is a RAGTruth run: score.")
    parser.add_argument("--contrast", type=Path, help="The contrast set's run, scored too.")
    args = parser.parse_args()
    if args.score:
        score(args.run_dir, args.contrast)
    else:
        judge_views(args.run_dir, args.set_items, args.views.split(","))


if __name__ == "__main__":
    main()
