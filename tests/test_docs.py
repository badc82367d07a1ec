"""The README and docs/: short enough to read, links that resolve, evidence from its runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_readme_is_read_in_ten_minutes() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 350, f"README.md has {lines} lines; move reference material to docs/"


def test_relative_links_resolve() -> None:
    """Every relative link of the README and docs/ names a file that exists (anchors aside)."""
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert broken == []


def test_anchors_resolve() -> None:
    """A link to `file.md#anchor` names a heading of that file (GitHub's slugs)."""

    def slugs(doc: Path) -> set[str]:
        headings = re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), flags=re.M)
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}

    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if "#" not in target or target.startswith(("http://", "https://")):
                continue
            file, anchor = target.split("#", 1)
            linked = (doc.parent / file).resolve() if file else doc
            if linked.suffix == ".md" and linked.exists() and anchor not in slugs(linked):
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert broken == []


def test_evidence_is_built_from_the_bench_results() -> None:
    """docs/evidence.md is what scripts/evidence.py makes of bench/results/*.json today."""
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "evidence.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
