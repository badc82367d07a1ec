"""Measure the judge's quote check on answers already checked without it (no re-judging).

    .venv/bin/python bench/quote_pass.py RUN_DIR [--set KEY=VALUE ...]

For every fact claim in RUN_DIR/checks.jsonl, asks the focused second question of
`quote_check` (does the quote, the best chunk's two sentences closest to the claim, state the
claim?) and writes RUN_DIR/quotes.json: {answer id: {claim index: {probabilities, quote}}}.
`bench/agreement.py --quotes` and `bench/contrast.py --quotes` then score the answers with
and without it side by side, so the check's worth is measured on the same claims for the cost
of its calls alone. Resumable: a RUN_DIR that has quotes.json is left as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from auditor.claim_rows import Claim
from auditor.config import EmbedderConfig, load_judge, parse_set_option
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.answers import items_from_run
from auditor.verify.entailment import label_probabilities
from auditor.verify.judges import make_judge
from auditor.verify.quotes import quote_call

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def stored_claim(data: dict[str, Any]) -> Claim:
    """A checks.jsonl claim back as a Claim (what quote_call reads)."""
    return Claim.from_json(data)


def judge_once(config: Any, calls: list[Any]) -> tuple[list[Any], float]:
    """One batch of calls on a judge started for it (and freed after); the seconds it took."""
    judge = make_judge(config)
    started = time.perf_counter()
    try:
        replies = judge.complete(calls)
    finally:
        judge.close()
    return replies, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    args = parser.parse_args()
    target = args.run_dir / "quotes.json"
    if target.exists():
        print(f"{target} exists; nothing to do")
        return
    config = load_judge(None, dict(parse_set_option(s) for s in args.set_items))
    items = {item.id: item for item in items_from_run(args.run_dir)}
    embedder = load_embedder(EmbedderConfig())
    calls, owners = [], []
    for row in read_jsonl(args.run_dir / "checks.jsonl"):
        for index, data in enumerate(row["claims"]):
            planned = quote_call(stored_claim(data), index, items[row["id"]], embedder.embed)
            if planned is not None:
                calls.append(planned[0])
                owners.append((row["id"], index, planned[1], planned[2]))
    replies, seconds = judge_once(config, calls)
    results: dict[str, Any] = {"seconds": seconds, "answers": {}}
    prompt = cached = 0
    for (owner, index, quote, chunk_id), reply in zip(owners, replies, strict=True):
        probabilities, written = label_probabilities(reply.top_logprobs, reply.text)
        results["answers"].setdefault(owner, {})[str(index)] = {
            "probabilities": probabilities,
            "written": written,
            "quote": quote,
            "chunk": chunk_id,
        }
        prompt += reply.prompt_tokens
        cached += reply.cached_tokens
    results["prompt_tokens"], results["cached_tokens"] = prompt, cached
    target.write_text(json.dumps(results), encoding="utf-8")
    print(
        f"{len(calls)} quote checks in {seconds:.0f} s; per claim {prompt / max(1, len(calls)):.0f} "
        f"prompt tokens, {(prompt - cached) / max(1, len(calls)):.0f} computed -> {target}"
    )


def with_quotes(
    checks: list[dict[str, Any]], quotes: dict[str, Any], threshold: float
) -> list[Any]:
    """The rows as the quote check would have left them (claims' p_supported and verdicts)."""
    from auditor.verify.quotes import apply_quote

    rows = []
    for row in checks:
        row = dict(row)
        claims = []
        for index, data in enumerate(row["claims"]):
            claim = stored_claim(data)
            entry = quotes.get(row["id"], {}).get(str(index))
            if entry is not None:
                apply_quote(
                    claim,
                    entry["quote"],
                    entry["chunk"],
                    entry["probabilities"],
                    entry["written"],
                    threshold,
                )
            claims.append(claim.to_json())
        row["claims"] = claims
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
