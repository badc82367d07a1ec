"""The README's `make demo` table, rebuilt from the demo run kept in docs/demo/.

    .venv/bin/python scripts/demo_table.py --keep reports/demo   # keep a finished demo run
    .venv/bin/python scripts/demo_table.py                       # rewrite the README's block
    .venv/bin/python scripts/demo_table.py --check               # exit 1 if the block is stale

`--keep DIR` copies each demo pipeline's summary.json (DIR/<pipeline>/summary.json, written by
`auditor audit`) to docs/demo/<pipeline>/summary.json and records in docs/demo/audit.json the
pipelines in the order the Makefile runs them, the gates it sets (DEMO_PIPELINES, DEMO_GATES)
and the report's paired differences of goodput and hallucination rate (which need the run's
records and checks, not kept). The block between the README's `demo-table` markers is what `auditor audit`
printed for that run: the table (`auditor.cli.report_cmd.format_table`), one line per gate
(`auditor.gates`), the report's path. No figure in it is copied by hand, and a test
(tests/test_docs.py) fails when the README and the kept run disagree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from auditor.cli.report_cmd import format_table  # noqa: E402
from auditor.gates import evaluate_gates, parse_gate  # noqa: E402

README = REPO / "README.md"
KEPT = REPO / "docs" / "demo"
MAKEFILE = REPO / "Makefile"
BEGIN = "<!-- demo-table: built by scripts/demo_table.py from docs/demo/; do not edit -->"
END = "<!-- /demo-table -->"


def makefile_demo() -> tuple[list[str], list[str]]:
    """The demo's pipelines (in run order) and gates, as the Makefile sets them."""
    text = MAKEFILE.read_text(encoding="utf-8")
    pipelines = re.search(r"^DEMO_PIPELINES\s*:=\s*(.+)$", text, flags=re.M)
    gates = re.search(r"^DEMO_GATES\s*:=\s*(.+)$", text, flags=re.M)
    if pipelines is None or gates is None:
        sys.exit(f"{MAKEFILE}: no DEMO_PIPELINES or DEMO_GATES line")
    return pipelines.group(1).split(), re.findall(r"--gate '([^']+)'", gates.group(1))


def keep(run: Path, folder: Path = KEPT) -> None:
    """Copy a finished demo run's summaries into `folder`, with its pipelines and gates."""
    pipelines, gates = makefile_demo()
    missing = [p for p in pipelines if not (run / p / "summary.json").is_file()]
    if missing:
        sys.exit(f"{run}: no summary.json for {', '.join(missing)}; run `make demo` first")
    for pipeline in pipelines:
        (folder / pipeline).mkdir(parents=True, exist_ok=True)
        summary = json.loads((run / pipeline / "summary.json").read_text(encoding="utf-8"))
        (folder / pipeline / "summary.json").write_text(
            json.dumps(portable(summary), indent=1) + "\n", encoding="utf-8"
        )
    audit = {
        "command": "make demo",
        "pipelines": pipelines,
        "gates": gates,
        "paired": paired(run, pipelines),
    }
    (folder / "audit.json").write_text(json.dumps(audit, indent=1) + "\n", encoding="utf-8")
    print(f"-> {folder}: {', '.join(pipelines)}; gates {', '.join(gates)}")


def portable(value: Any) -> Any:
    """`value` with each absolute "path" (the model cache of the machine that ran the demo)
    cut to its last part: the kept run names no machine's folders."""
    if isinstance(value, dict):
        return {
            k: Path(v).name
            if k == "path" and isinstance(v, str) and v.startswith("/")
            else portable(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [portable(v) for v in value]
    return value


def paired(run: Path, pipelines: list[str]) -> list[dict[str, Any]]:
    """The report's paired differences (best goodput first, over the shared questions): the
    README's prose quotes them, and the summaries alone cannot give them."""
    from auditor.compare import compare_pair
    from auditor.results import load_run

    runs = []
    for pipeline in pipelines:
        artifacts = load_run(run / pipeline)
        artifacts.summary = json.loads(
            (run / pipeline / "summary.json").read_text(encoding="utf-8")
        )
        runs.append(artifacts)
    ranked = sorted(
        (r for r in runs if r.summary["metrics"]["goodput_tps"]["value"] is not None),
        key=lambda r: -r.summary["metrics"]["goodput_tps"]["value"],
    )
    found = []
    for figure in ("goodput_tps", "hallucination_rate") if len(ranked) >= 2 else ():
        pair = compare_pair(ranked[0], ranked[1], figure)
        found.append(
            {
                "figure": figure,
                "a": pair.a,
                "b": pair.b,
                "value_a": pair.value_a,
                "value_b": pair.value_b,
                "difference": pair.difference,
                "ci95": list(pair.interval) if pair.interval else None,
                "questions": pair.questions,
                "distinguishable": pair.distinguishable,
            }
        )
    return found


def load_kept(folder: Path = KEPT) -> tuple[list[Any], list[str]]:
    """The kept runs (name and summary, in run order) and the gates."""
    audit = json.loads((folder / "audit.json").read_text(encoding="utf-8"))
    runs = [
        SimpleNamespace(
            name=name,
            summary=json.loads((folder / name / "summary.json").read_text(encoding="utf-8")),
        )
        for name in audit["pipelines"]
    ]
    return runs, audit["gates"]


def render(folder: Path = KEPT) -> str:
    """The README block: what `auditor audit` printed for the kept run (paths elided)."""
    runs, gate_texts = load_kept(folder)
    results = evaluate_gates(
        [parse_gate(text) for text in gate_texts], {run.name: run.summary for run in runs}
    )
    lines = [format_table(runs), *(result.describe() for result in results)]
    lines.append("report: /.../reports/demo/report.html")
    return "\n".join([BEGIN, "```", *lines, "```", END])


def current_block(readme: str) -> str:
    """The README's block between the markers, markers included."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        sys.exit(f"{README}: no {BEGIN!r} ... {END!r} block")
    return readme[start : end + len(END)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR", help="Keep this demo run first.")
    parser.add_argument("--check", action="store_true", help="Exit 1 if the block is stale.")
    args = parser.parse_args()
    if args.keep:
        keep(args.keep)
    readme = README.read_text(encoding="utf-8")
    block, wanted = current_block(readme), render()
    if args.check:
        if block != wanted:
            sys.exit(f"{README}: the demo table is stale; run .venv/bin/python {__file__}")
        return
    README.write_text(readme.replace(block, wanted), encoding="utf-8")
    print(f"-> {README}")


if __name__ == "__main__":
    main()
