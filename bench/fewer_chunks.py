"""A checked run decided again as if each claim had been checked against fewer chunks.

    .venv/bin/python bench/fewer_chunks.py RUN_DIR --chunks 1 --out NEW_DIR
    .venv/bin/python bench/paired.py agreement RUN_DIR NEW_DIR --name NAME

RUN_DIR is a run dir `auditor calibrate` or `bench/agreement.py --out` checked with
`chunks_per_claim` = K. Each claim-chunk label is one judge call on that chunk alone, so a check
with fewer chunks per claim asks a subset of the same calls: the claim's `--chunks` likeliest
chunks, ranked by the same embedder and rule as the check (`rank_chunks`). This keeps only
their stored judgements and decides each claim again (`redecide`), judging nothing. What it
cannot reproduce: the prefix cache's last-digit differences in a label's probabilities. The
calls and computed prompt tokens saved are estimated from the run's own per-answer counts
(each label call of an answer costs the same share); a run with the setting measures them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim
from auditor.config import EmbedderConfig, JudgeConfig, config_sha256
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.answers import items_from_run
from auditor.verify.evidence import rank_chunks
from auditor.verify.verdicts import redecide


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--chunks", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    manifest = json.loads((args.run / "check.json").read_text(encoding="utf-8"))
    config = JudgeConfig.model_validate(manifest["judge"]["config"])
    if args.chunks >= config.chunks_per_claim:
        sys.exit(f"{args.run}: checked with {config.chunks_per_claim} chunks per claim already")
    items = {item.id: item for item in items_from_run(args.run)}
    embedder = load_embedder(EmbedderConfig())
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("manifest.json", "records.jsonl"):
        shutil.copy(args.run / name, args.out / name)
    fewer = config.model_copy(update={"chunks_per_claim": args.chunks})
    kept_calls = all_calls = 0
    rows = []
    for row in read_jsonl(args.run / "checks.jsonl"):
        item = items[row["id"]]
        claims = [Claim.from_json(c) for c in row["claims"]]
        returned = [text for _, text in item.chunks]
        ranked = (
            rank_chunks(
                embedder.embed, [c.text for c in claims], returned, item.question, args.chunks
            )
            if claims and returned
            else [[] for _ in claims]
        )
        ids = [chunk_id for chunk_id, _ in item.chunks]
        for claim, top in zip(claims, ranked, strict=True):
            wanted = {ids[i] for i in top}
            all_calls += len(claim.judgements)
            claim.judgements = [j for j in claim.judgements if j["chunk"] in wanted]
            kept_calls += len(claim.judgements)
            redecide(claim, item, fewer)
        rows.append(row | {"claims": [c.to_json() for c in claims]})
    with (args.out / "checks.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    manifest["judge"]["config"] = fewer.model_dump(mode="json")
    manifest["judge"]["sha256"] = config_sha256(fewer)
    manifest["fewer_chunks"] = {"from": str(args.run), "kept_calls": kept_calls, "calls": all_calls}
    (args.out / "check.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    print(
        f"{len(rows)} answers: kept {kept_calls} of {all_calls} claim-chunk labels "
        f"({kept_calls / max(all_calls, 1):.2f}) -> {args.out}"
    )


if __name__ == "__main__":
    main()
