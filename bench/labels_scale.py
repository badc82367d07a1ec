"""Seconds of `auditor report RUN --labels FILE` per megabyte of labels: linear, or not.

    .venv/bin/python bench/labels_scale.py [--sizes 2 5 10 20] [--answers 30] [--texts]
        [--rounds 1]

A run dir of `--answers` answers is checked by the fake judge (no engine) and all of them
drawn for review; each labels file is made of label lines as the review page writes them (id,
label, reviewer, time, fingerprints; with `--texts` also the question, answer and contexts:
fewer, longer lines), every drawn answer labelled and the file filled to its size with copies
(the downloads of several reviewers concatenated: copies settle into one label per answer). For each size the whole command runs in this
process (reading, settling, assigning the labels, the reviewed rates, the HTML), the median
of `--rounds`; printed side by side with seconds per MB and that figure against the smallest
size's (1.0 everywhere: linear; growing with the size: a step worse than linear, as settling
copies was: 40 s for 20 MB before issue 48, each copy's lines tuple built anew).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from click.testing import CliRunner

from auditor.cli import cli
from auditor.review import check_fingerprint, run_fingerprint
from auditor.testing import FakeEmbedder, FakeJudge

MB = 1_000_000
CHUNKS = (
    "The T{n} thermostat warranty lasts two years from the delivery date.",
    "Unopened T{n} thermostats can be returned within {m} days of delivery.",
)


def checked_run(root: Path, answers: int) -> Path:
    """A run dir of `answers` answers checked by the fake judge, every one drawn for review."""
    import auditor.ingest.embed
    import auditor.verify.judges

    auditor.verify.judges.make_judge = lambda config: FakeJudge()  # type: ignore[assignment]
    auditor.ingest.embed.load_embedder = lambda config: FakeEmbedder()  # type: ignore[assignment]
    rows = []
    for k in range(answers):
        chunks = [c.format(n=k + 2, m=30 + k) for c in CHUNKS]
        rows.append({"id": f"a{k}", "question": f"Returns of the T{k + 2}?", "contexts": chunks,
                     "answer": chunks[1] if k % 3 else chunks[1].replace(str(30 + k), str(90 + k))})  # fmt: skip
    source = root / "answers.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = root / "run"
    for args in (
        ["check", "--answers", str(source), "--out", str(run), "-q"],
        ["review", str(run), "--sample", str(answers)],
    ):
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
    return run


def label_lines(run: Path, texts: bool) -> list[str]:
    """One label line per drawn answer, in the drawn order, as the review page writes them
    (with the answer's texts where `texts`)."""
    manifest = json.loads((run / "manifest.json").read_text())
    check = json.loads((run / "check.json").read_text())
    records = {
        r["id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())
    }
    drawn = [e["id"] for e in json.loads((run / "review.json").read_text())["sample"]]
    lines = []
    for ident in drawn:
        record = records[ident]
        label = {
            "id": ident,
            "hallucinated": "9" in record["answer"],
            "fingerprint": run_fingerprint(manifest),
            "check_fingerprint": check_fingerprint(check),
            "reviewer": "Ana",
            "labelled_at": "2026-12-06T10:00:00Z",
        }
        if texts:
            label |= {
                "question": record["question"],
                "answer": record["answer"],
                "contexts": [c["text"] for c in record["retrieved"]],
            }
        lines.append(json.dumps(label) + "\n")
    return lines


def labels_file(path: Path, lines: list[str], megabytes: float) -> int:
    """`path` filled with `lines`, over and over, to `megabytes`; the lines written."""
    out, size = [], 0
    while size < megabytes * MB:
        line = lines[len(out) % len(lines)]
        out.append(line)
        size += len(line.encode())
    path.write_text("".join(out), encoding="utf-8")
    return len(out)


def report_seconds(run: Path, labels: Path, out: Path) -> float:
    started = time.perf_counter()
    done = CliRunner().invoke(cli, ["report", str(run), "--labels", str(labels), "--out", str(out)])
    spent = time.perf_counter() - started
    assert done.exit_code == 0, done.output
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[2, 5, 10, 20])
    parser.add_argument("--answers", type=int, default=30)
    parser.add_argument("--texts", action="store_true", help="Label lines with their texts.")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run = checked_run(root, args.answers)
        lines = label_lines(run, args.texts)
        rows: list[dict[str, Any]] = []
        for size in args.sizes:
            labels = root / f"labels-{size:g}MB.jsonl"
            count = labels_file(labels, lines, size)
            seconds = statistics.median(
                report_seconds(run, labels, root / "report.html") for _ in range(args.rounds)
            )
            rows.append({"mb": size, "lines": count, "seconds": seconds})
            labels.unlink()
    base = rows[0]["seconds"] / rows[0]["mb"]
    print(f"{'MB':>6} {'lines':>8} {'seconds':>9} {'s/MB':>7} {'s/MB vs first':>14}")
    for row in rows:
        per = row["seconds"] / row["mb"]
        print(
            f"{row['mb']:>6g} {row['lines']:>8} {row['seconds']:>9.2f} {per:>7.3f} {per / base:>14.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
