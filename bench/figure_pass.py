"""Measure the judge's figure check on answers already checked without it (no re-judging).

    .venv/bin/python bench/figure_pass.py RUN_DIR [--set KEY=VALUE ...]

For every supported fact claim in RUN_DIR/checks.jsonl, asks the figure check's cloze calls
(each figure of the claim blanked out, filled in from the best supporting chunk) and writes
RUN_DIR/figures.json: {answer id: {claim index: [{figure, chunk, text, top_logprobs}]}}.
`bench/agreement.py --figures` and `bench/contrast.py --figures` then score the answers with
and without it side by side, on the same claims, for the cost of its calls alone.
Resumable: a RUN_DIR that has figures.json is left as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from auditor.config import load_judge, parse_set_option
from auditor.store import read_jsonl
from auditor.verify.answers import AnswerItem, items_from_run
from auditor.verify.figures import FigureAsk, apply_figures, figure_calls
from auditor.verify.judges import make_judge
from bench.quote_pass import stored_claim

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    args = parser.parse_args()
    target = args.run_dir / "figures.json"
    if target.exists():
        print(f"{target} exists; nothing to do")
        return
    config = load_judge(None, dict(parse_set_option(s) for s in args.set_items))
    items = {item.id: item for item in items_from_run(args.run_dir)}
    calls, owners = [], []
    for row in read_jsonl(args.run_dir / "checks.jsonl"):
        for index, data in enumerate(row["claims"]):
            for call, ask in figure_calls(stored_claim(data), index, items[row["id"]]):
                calls.append(call)
                owners.append((row["id"], index, ask))
    judge = make_judge(config)
    started = time.perf_counter()
    try:
        replies = judge.complete(calls)
    finally:
        judge.close()
    seconds = time.perf_counter() - started
    results: dict[str, Any] = {"seconds": seconds, "answers": {}}
    prompt = cached = 0
    for (owner, index, ask), reply in zip(owners, replies, strict=True):
        results["answers"].setdefault(owner, {}).setdefault(str(index), []).append(
            {
                "figure": ask.figure,
                "chunk": ask.chunk_id,
                "text": reply.text,
                "top_logprobs": reply.top_logprobs,
            }
        )
        prompt += reply.prompt_tokens
        cached += reply.cached_tokens
    results["prompt_tokens"], results["cached_tokens"] = prompt, cached
    target.write_text(json.dumps(results), encoding="utf-8")
    print(
        f"{len(calls)} figure checks in {seconds:.0f} s; per call {prompt / max(1, len(calls)):.0f} "
        f"prompt tokens, {(prompt - cached) / max(1, len(calls)):.0f} computed -> {target}"
    )


def with_figures(
    checks: list[dict[str, Any]],
    figures: dict[str, Any],
    items: dict[str, AnswerItem],
    threshold: float,
) -> list[dict[str, Any]]:
    """The rows as the figure check would have left them (claims' p_supported and verdicts)."""
    rows = []
    for row in checks:
        row = dict(row)
        claims = []
        chunks = dict(items[row["id"]].chunks)
        for index, data in enumerate(row["claims"]):
            claim = stored_claim(data)
            entries = figures.get(row["id"], {}).get(str(index))
            if entries:
                answers = [
                    (
                        FigureAsk(index, e["figure"], e["chunk"], chunks[e["chunk"]]),
                        e["text"],
                        e["top_logprobs"],
                    )
                    for e in entries
                ]
                apply_figures(claim, answers, threshold)
            claims.append(claim.to_json())
        row["claims"] = claims
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
