"""A hostile pass over the review loop and the bundle: every case of tests/hostile.py through the
real CLI commands, each classified refused / honest / silent-wrong / loud-defect.

    .venv/bin/python bench/hostile_review.py [--name NAME] [--markdown FILE] [--only REGEX]

Builds a small audit with the fakes (no engine: two runs of 30 imported answers checked by the
fake judge, a review sample of 12 with a blind second review, labels by two reviewers and an
adjudicator, keys, a signed bundle; an audit of two pipelines on an index), then runs each
hostile input (an edited review.json, labels, files, run dirs, outputs over inputs, gates,
bundles, signatures, keys) through `auditor review`, `report --labels`, `audit --labels`,
`bundle`, `sign`, `verify` or `keygen` in a copy of the base of its own, in process where it
can and in a subprocess (a memory limit, a timeout) where a hang or a real file descriptor
matters. What each outcome means: tests/hostile.py. Each case declares what it should be (the
issue's expectation, not today's behaviour): `refused` with the words its message must hold,
or `honest`.

Writes bench/results/NAME.json (default hostile-review-DATE): one entry per case (id, class,
command, input, expected, outcome, exit code, first line of stderr, seconds), the counts, the
CPU model (`lscpu`) and the git commit; prints the counts by class and outcome and every
silent-wrong and loud-defect case; `--markdown FILE` writes the table for docs/faults.md.
About 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from bench.harness import REPO, write_result
from tests.hostile import CASES, OUTCOMES, hostile_base, run_case

HEADING = "Hostile pass over the review loop and the bundle"


def lscpu_model() -> str:
    try:
        shown = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    found = re.search(r"^Model name:\s*(.+)$", shown, re.M)
    return found.group(1).strip() if found else "unknown"


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        # the tree of auditor/ (the code under test), to tell this commit's from main's
        "auditor_tree": git("rev-parse", "HEAD:auditor"),
        # the bench's own files aside: what else differs from the commit
        "dirty": [
            line
            for line in git("status", "--porcelain").splitlines()
            if not line.endswith(
                ("bench/hostile_review.py", "tests/hostile.py", "tests/test_hostile_bench.py")
            )
            and "bench/results/" not in line
        ],
    }


def table(entries: list[dict[str, Any]]) -> str:
    """Counts by class and outcome, as text."""
    classes = list(dict.fromkeys(e["class"] for e in entries))
    outcomes = [o for o in (*OUTCOMES, "bench-error") if any(e["outcome"] == o for e in entries)]
    rows = [["class", *outcomes, "cases"]]
    for cls in classes:
        mine = Counter(e["outcome"] for e in entries if e["class"] == cls)
        rows.append([cls, *(str(mine[o]) for o in outcomes), str(sum(mine.values()))])
    total = Counter(e["outcome"] for e in entries)
    rows.append(["all", *(str(total[o]) for o in outcomes), str(len(entries))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def _cell(text: str, limit: int = 160) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def markdown(entries: list[dict[str, Any]], result: dict[str, Any]) -> str:
    counts = result["counts"]
    lines = [
        f"## {HEADING}",
        "",
        f"`bench/hostile_review.py` on {result['date']} (commit {result['git']['commit'][:12]}, "
        f"{result['lscpu_model']}): {len(entries)} hostile inputs to `auditor review`, `report "
        "--labels`, `audit --labels`, `bundle`, `sign`, `verify` and `keygen`; "
        + ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES)
        + ". refused: one `Error:` line, nothing written; honest: the figures the bench "
        "recomputes; silent-wrong: exit 0 with another figure, verdict or file; loud-defect: a "
        "traceback, a hang, or a message without the words the case asks for.",
        "",
        "| case | class | outcome | what the user gets |",
        "|---|---|---|---|",
    ]
    for e in entries:
        said = e["detail"] if e["outcome"] != "refused" else e["stderr_first_line"]
        expected = "" if e["as_expected"] else f" (expected {e['expected']})"
        lines.append(
            f"| {_cell(e['input'] or e['id'], 90)} | {e['class']} | {e['outcome']}{expected} | "
            f"`{e['command']}`: {_cell(said)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=f"hostile-review-{time.strftime('%Y-%m-%d')}")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown table here")
    parser.add_argument("--only", help="only the cases whose id matches this regular expression")
    parser.add_argument("--no-write", action="store_true", help="print only (no results file)")
    args = parser.parse_args()
    chosen = [c for c in CASES if not args.only or re.search(args.only, c.id)]
    started = time.monotonic()
    entries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hostile-review-") as tmp:
        work = Path(tmp)
        with hostile_base(work, audit=any(c.needs_audit for c in chosen)) as base:
            built = time.monotonic() - started
            print(
                f"base built in {built:.1f} s (seed {base.seed}); {len(chosen)} cases", flush=True
            )
            for n, case in enumerate(chosen, 1):
                entry = run_case(case, base, work / "cases")
                entries.append(entry)
                mark = "" if entry["as_expected"] else f"  (expected {case.expected})"
                print(
                    f"{n:3d} {entry['outcome']:<12} {case.id:<36} {entry['seconds']:6.2f} s"
                    f"{mark}  {entry['detail'][:110]}",
                    flush=True,
                )
    seconds = time.monotonic() - started
    counts = Counter(e["outcome"] for e in entries)
    print()
    print(table(entries))
    for outcome in ("silent-wrong", "loud-defect", "bench-error"):
        found = [e for e in entries if e["outcome"] == outcome]
        if found:
            print(f"\n{outcome} ({len(found)}):")
            for e in found:
                print(f"  {e['id']}: {e['input']}: {e['detail'][:200]}")
    print(f"\n{len(entries)} cases in {seconds:.0f} s")
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "git": git_commit(),
        "lscpu_model": lscpu_model(),
        "counts": dict(counts),
    }
    if not args.no_write:
        write_result(
            args.name,
            "hostile review",
            {
                "cases": len(entries),
                **{o: counts.get(o, 0) for o in (*OUTCOMES, "bench-error")},
                "as_expected": sum(e["as_expected"] for e in entries),
                "seconds": round(seconds),
                "base_seconds": round(built, 1),
            },
            note="hostile inputs through the CLI's review loop, report, audit, bundle, sign, "
            "verify and keygen on a small audit made with the fakes (tests/hostile.py); each "
            "case's expectation is the issue's, not this commit's behaviour",
            git=result["git"],
            lscpu_model=result["lscpu_model"],
            counts=result["counts"],
            by_class={
                cls: dict(Counter(e["outcome"] for e in entries if e["class"] == cls))
                for cls in dict.fromkeys(e["class"] for e in entries)
            },
            cases=entries,
        )
    if args.markdown:
        result["date"] = time.strftime("%Y-%m-%d")
        args.markdown.write_text(markdown(entries, result), encoding="utf-8")
        print(f"-> {args.markdown}")
    return 0 if not counts.get("bench-error") else 1


if __name__ == "__main__":
    raise SystemExit(main())
