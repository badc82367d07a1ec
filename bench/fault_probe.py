"""Damaged run dirs, field by field: does every command that reads one refuse it in one line or
compute the same figures, never a traceback and never a silently different figure?

    .venv/bin/python bench/fault_probe.py [--name fault-probe-DATE] [--limit N]

Builds one audited run dir of a pipeline (fake embedder, generator and judge: no engine) with a
review sample drawn, then, for every field of manifest.json, check.json and review.json and of
the first row of records.jsonl and checks.jsonl (nested fields included, a list by its first
item), writes a copy with that field deleted, null, the string "x" and the list [1], and runs
`auditor report` on it in process. Each outcome is one of:
  refused    exit 2, one `Error:` line on stderr, no traceback, no file of the run dir changed;
  same       exit 0 and every figure of summary.json as on the undamaged copy;
  changed    exit 0 and some figure differs: listed, each with why where the damage is data a
             writer may legitimately leave out (a reply not streamed has no TTFT);
  crash      anything else (a traceback): each listed.
Records mutations also run `auditor check` on the copy (it reads the records the judge needs).
Not part of CI: ~15 min on 2 cores; the fault suite holds one case per kind of damage.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from click.testing import CliRunner

from auditor.cli import cli
from bench.harness import write_result

ARTIFACTS = ("manifest.json", "check.json", "review.json", "records.jsonl", "checks.jsonl")
DAMAGES = {"null": None, "string": "x", "list": [1]}
# (file, field, damage) whose changed figure is data a writer may leave out, not damage
LEGITIMATE = {
    ("records.jsonl", "output_tokens", "delete"): "a target that reports no token counts",
    ("records.jsonl", "output_tokens", "null"): "a target that reports no token counts",
    ("records.jsonl", "ttft_s", "delete"): "a reply not streamed has no TTFT",
    ("records.jsonl", "ttft_s", "null"): "a reply not streamed has no TTFT",
    ("records.jsonl", "e2e_s", "delete"): "answers imported from logs have no latency",
    ("records.jsonl", "e2e_s", "null"): "answers imported from logs have no latency",
    ("records.jsonl", "error", "string"): "a failed request: its error is data",
    ("manifest.json", "sessions.0", "delete"): "a run killed before its first session was "
    "written has no session: the same file",
}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list) and value:
        found += _paths(value[0], (*path, 0))
    return found


def _damaged(document: Any, path: tuple[Any, ...], damage: str) -> Any:
    document = copy.deepcopy(document)
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    if damage == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(DAMAGES[damage])
    return document


def _figures(run: Path) -> str:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    keep = {k: summary.get(k) for k in ("metrics", "claims", "outcomes", "requests")}
    return json.dumps(keep, sort_keys=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _base(work: Path) -> Path:
    """An audited run of one pipeline on the fake components, with a review sample."""
    import auditor.ingest.embed
    import auditor.verify.judges
    from auditor.config import IngestConfig
    from auditor.ingest.build import ingest_corpus
    from auditor.testing import FakeEmbedder, FakeJudge
    from tests.test_audit import DOCS, QUESTIONS, SLOPPY, _audit

    auditor.ingest.embed.load_embedder = lambda config: FakeEmbedder()  # no engine, no model
    auditor.verify.judges.make_judge = lambda config: FakeJudge()
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    for number, text in enumerate(DOCS):
        (corpus / f"d{number}.md").write_text(text, encoding="utf-8")
    ingest_corpus(corpus, work / "index", IngestConfig(), FakeEmbedder())
    questions = work / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    _audit((work / "index", questions), work / "audit", {"probe": SLOPPY})
    run = work / "audit" / "probe"
    drawn = CliRunner().invoke(cli, ["review", str(run), "--sample", "2", "--seed", "1"])
    assert drawn.exit_code == 0, drawn.output
    return run


def _outcome(command: list[str], run: Path, good: str | None) -> tuple[str, str]:
    before = _tree(run)
    done = CliRunner().invoke(cli, command)
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    if done.exit_code == 2 and len(errors) == 1 and "Traceback" not in done.output:
        changed = _tree(run) != before
        said = errors[0].replace(f"{run.parent}/", "")  # paths relative to the probe's folder
        return ("crash", "a refusal that changed files") if changed else ("refused", said)
    if done.exit_code == 0:
        if good is None or _figures(run) == good:
            return "same", ""
        return "changed", ""
    exc = done.exception
    return "crash", f"exit {done.exit_code}: {type(exc).__name__}: {str(exc)[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", help="write bench/results/NAME.json")
    parser.add_argument("--limit", type=int, help="at most N damaged copies (a quick look)")
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        base = _base(Path(tmp) / "base")
        work = Path(tmp) / "work"
        report = ["report", str(work), "--out", str(Path(tmp) / "report.html")]
        shutil.copytree(base, work)
        assert CliRunner().invoke(cli, report).exit_code == 0
        good = _figures(work)
        cases: list[dict[str, Any]] = []
        for name in ARTIFACTS:
            text = (base / name).read_text(encoding="utf-8")
            rows = (
                [json.loads(line) for line in text.splitlines()]
                if name.endswith(".jsonl")
                else [json.loads(text)]
            )
            for path in _paths(rows[0]):
                for damage in ("delete", *DAMAGES):
                    if args.limit is not None and len(cases) >= args.limit:
                        break
                    shutil.rmtree(work)
                    shutil.copytree(base, work)
                    damaged = [_damaged(rows[0], path, damage), *rows[1:]]
                    (work / name).write_text(
                        "".join(json.dumps(r) + "\n" for r in damaged)
                        if name.endswith(".jsonl")
                        else json.dumps(damaged[0]),
                        encoding="utf-8",
                    )
                    field = ".".join(map(str, path))
                    commands = [("report", report)]
                    if name == "records.jsonl":
                        commands.append(("check", ["check", str(work)]))
                    for command, argv in commands:
                        kind, said = _outcome(argv, work, good if command == "report" else None)
                        why = LEGITIMATE.get((name, field, damage))
                        cases.append(
                            {
                                "file": name,
                                "field": field,
                                "damage": damage,
                                "command": command,
                                "outcome": kind,
                                "said": said,
                                "legitimate": why if kind == "changed" else None,
                            }
                        )
                        if kind in ("crash", "changed"):
                            print(f"{kind}: {command} {name} {field} {damage} {said} {why or ''}")
    counts = {
        k: sum(c["outcome"] == k for c in cases) for k in ("refused", "same", "changed", "crash")
    }
    unexplained = [c for c in cases if c["outcome"] == "changed" and not c["legitimate"]]
    figures = {
        "cases": len(cases),
        **counts,
        "changed_unexplained": len(unexplained),
        "seconds": round(time.time() - started),
    }
    print(json.dumps(figures))
    if args.name:
        write_result(
            args.name,
            "fault probe",
            figures,
            note="every field of a run dir's files deleted, null, a string and a list; "
            "`auditor report` (and `check` for records) on each copy, fake components",
            cases=cases,
        )
    return 0 if counts["crash"] == 0 and not unexplained else 1


if __name__ == "__main__":
    raise SystemExit(main())
