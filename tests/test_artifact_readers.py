"""Every file the auditor reads goes through its one reader: a run dir's files through
`auditor.store` (and `auditor.review` for review.json, `auditor.results` only to say that a
derived summary.json was damaged), user inputs through `auditor.jsonl.iter_objects`, a
calibration through `auditor.calibrate.load_calibration`, an index manifest through
`auditor.ingest.manifest.read_manifest`. A stray `json.loads` on one of those files would read
it past the shape checks that turn a hand edit into a one-line refusal; this test finds it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

# module -> what its JSON parsing reads (none of them a run-dir file outside its reader)
READERS = {
    "auditor/store.py": "manifest.json, records.jsonl, checks.jsonl, check.json, review.json",
    "auditor/jsonl.py": "questions, answers, labels and examples files (iter_objects)",
    "auditor/calibrate.py": "calibration.json (load_calibration, validated by CalibrationFile)",
    "auditor/ingest/manifest.py": "the index manifest (read_manifest, an IndexManifest)",
    "auditor/results.py": "summary.json, only to say it was damaged before it is regenerated",
    "auditor/history.py": "the summary column of the SQLite audit history",
    "auditor/ingest/build.py": "the index manifest's generation, leniently, to pick the next",
    "auditor/ingest/index.py": "the embedding cache (a damaged entry is recomputed)",
    "auditor/models/prepare.py": "a prepared model's identity file and a helper's output",
    "auditor/config.py": "a deep copy of a config through JSON",
    "auditor/scale/checking.py": "rows passed between Ray workers",
    "auditor/generate/scheduler.py": "an HTTP error body",
    "auditor/generate/openai_server.py": "a server-sent event",
    "auditor/generate/http_target.py": "an HTTP response body",
    "auditor/verdict_cases.py": "RAGTruth rows for the verdict contrast set (benches)",
    "auditor/testing.py": "the fake judge's prompt",
    "auditor/evidence/dsse.py": "a bundle's DSSE envelope (Envelope.from_bytes checks each field)",
    "auditor/evidence/verify.py": "a bundle's signed statement (read_statement checks its type "
    "and predicate version) and figures compared through canonical JSON",
    "auditor/evidence/extracted.py": "what a report shows, compared with the statement through "
    "canonical JSON",
    "auditor/traces/otlp.py": "OTLP JSON trace exports, streamed line by line (read_export)",
    "auditor/traces/conventions.py": "JSON-valued span attributes: messages, documents, metadata",
    "auditor/traces/importer.py": "its own spill files between its two passes (span facts, records)",
    "auditor/traces/sink.py": "an OTLP/HTTP JSON request body it receives (for tests and exports)",
}
PARSERS = {("json", "loads"), ("json", "load"), ("orjson", "loads")}


def _calls(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        owner = (
            func.value.id
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else None
        )
        if isinstance(func, ast.Attribute) and (owner, func.attr) in PARSERS:
            found.append((node.lineno, f"{owner}.{func.attr}"))
        if isinstance(func, ast.Name) and func.id == "read_jsonl":
            found.append((node.lineno, "read_jsonl"))
    return found


def test_no_module_parses_json_outside_the_readers() -> None:
    stray = []
    for path in sorted((REPO / "auditor").rglob("*.py")):
        module = str(path.relative_to(REPO))
        for line, call in _calls(path):
            if module not in READERS or (call == "read_jsonl" and module != "auditor/store.py"):
                stray.append(f"{module}:{line}: {call}")
    assert not stray, "read these through their reader (see READERS): " + "; ".join(stray)


def test_every_listed_reader_still_parses_json() -> None:
    """A reader that no longer parses anything leaves the list: it would hide a new stray."""
    idle = [m for m in READERS if not _calls(REPO / m)]
    assert not idle, idle


def test_the_search_finds_a_stray_read(tmp_path: Path) -> None:
    stray = tmp_path / "x.py"
    stray.write_text(
        "import json\nrows = [json.loads(l) for l in open('run/checks.jsonl')]\n"
        "more = read_jsonl(p)\n"
    )
    assert sorted(_calls(stray)) == [(2, "json.loads"), (3, "read_jsonl")]
