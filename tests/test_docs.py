"""The README and docs/: short enough to read, links that resolve, evidence from its runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


README_LINES = 200  # the README has fewer lines than this
FIRST_SCREEN_FIGURES = 25  # the README's first screen has at most this many figures
FIGURE = re.compile(r"(?<![\w.])(?<!\w-)\d+(?:[.,]\d+)*(?:-\d+(?:[.,]\d+)*)?")


def first_screen(readme: str) -> str:
    """What a reader sees before scrolling: everything before the second `## ` heading (the
    title, the intro and Quick start)."""
    starts = [m.start() for m in re.finditer(r"^## ", readme, flags=re.M)]
    assert len(starts) >= 2, "README.md: fewer than two ## headings"
    return readme[: starts[1]]


def figures(text: str) -> list[str]:
    """The numbers a reader reads in Markdown text: each token such as `8`, `8.8`, `1,652` or
    `35-45` is one figure (a date, one); digits inside a name (`x86-64`, `Qwen2.5`, `bf16`) are
    none; numbers in fenced code blocks, HTML comments and link targets (image paths included)
    are left out, link texts such as `[1]` counted."""
    text = re.sub(r"^(```|~~~).*?^\1[ \t]*$", "", text, flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return FIGURE.findall(text)


def test_figures_are_counted_as_a_reader_reads_them() -> None:
    text = (
        "On 2 cores, 8.8 min ([results](bench/r-2026-12-07.json)), 35-45 min, 1,652 answers,\n"
        "x86-64, Qwen2.5, bf16, +-10 on 2026-12-07 ![shot](docs/report-2.png) [1](a.json)\n"
        "```bash\nmake demo DEMO_LIMIT=40\n```\n<!-- 99 -->\n"
    )
    assert figures(text) == ["2", "8.8", "35-45", "1,652", "10", "2026-12", "1"]


def test_readme_is_read_in_ten_minutes() -> None:
    """README.md is short, and its first screen starts a new user with few figures: detail and
    measurements live in docs/ (see the README's Documentation table)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.count("\n")
    assert lines < README_LINES, f"README.md has {lines} lines; move reference material to docs/"
    found = figures(first_screen(readme))
    assert len(found) <= FIRST_SCREEN_FIGURES, (
        f"README.md's first screen (before its second ## heading) has {len(found)} figures "
        f"({', '.join(found)}); at most {FIRST_SCREEN_FIGURES}: move detail deeper or to docs/"
    )


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


def _synopsis() -> dict[tuple[str, ...], set[str]]:
    """The flags each command's synopsis in docs/commands.md lists, by command path (the
    synopsis is the first code block; an entry starts with `auditor` and indented lines
    continue it; a command with several entries gets the union)."""
    import click

    from auditor.cli import cli

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    match = re.search(r"^```\n(.*?)^```", text, flags=re.M | re.S)
    assert match, "docs/commands.md: no synopsis code block"
    entries: list[str] = []
    for line in match.group(1).splitlines():
        if line.startswith("auditor"):
            entries.append(line)
        elif line.strip():
            assert entries and line[0] == " ", f"docs/commands.md synopsis: stray line {line!r}"
            entries[-1] += " " + line
    listed: dict[tuple[str, ...], set[str]] = {}
    for entry in entries:
        command: click.Command = cli
        path: list[str] = []
        for word in entry.split()[1:]:
            if not isinstance(command, click.Group) or word not in command.commands:
                break
            command = command.commands[word]
            path.append(word)
        flags = set(re.findall(r"(?<![\w.=-])(--?[A-Za-z][\w-]*)", entry)) - {"-h", "--help"}
        listed.setdefault(tuple(path), set()).update(flags)
    return listed


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command and subcommand of the group, the group itself first."""
    import click

    assert isinstance(command, click.Command)
    found: list[tuple[tuple[str, ...], object]] = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            found += _commands(sub, (*path, name))
    return found


def test_synopsis_lists_every_flag_of_every_command() -> None:
    """docs/commands.md's synopsis lists each command's options (one of an option's flags,
    e.g. `-q` for `-q/--quiet`) and no flag the command lacks; every command has an entry."""
    import click

    from auditor.cli import cli

    listed = _synopsis()
    problems = []
    for path, command in _commands(cli):
        assert isinstance(command, click.Command)
        name = " ".join(("auditor", *path))
        options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
        if path not in listed:
            if options or not isinstance(command, click.Group):
                problems.append(f"{name}: no entry in the synopsis")
            continue
        flags = listed[path]
        missing = [
            next((f for f in p.opts if f.startswith("--")), p.opts[0])
            for p in options
            if not flags & {*p.opts, *p.secondary_opts}
        ]
        known = {f for p in options for f in (*p.opts, *p.secondary_opts)}
        extra = sorted(flags - known)
        if missing:
            problems.append(f"{name}: the synopsis lacks {', '.join(missing)}")
        if extra:
            problems.append(f"{name}: the synopsis lists {', '.join(extra)}, which it lacks")
    assert problems == [], "docs/commands.md synopsis:\n" + "\n".join(problems)


def test_configuration_names_every_bundled_pipeline() -> None:
    """docs/configuration.md names (in backticks) every pipeline file in pipelines/."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [
        p.stem for p in sorted((REPO / "pipelines").glob("*.toml")) if f"`{p.stem}`" not in text
    ]
    assert missing == [], f"docs/configuration.md does not name {', '.join(missing)}"


def test_fault_table_counts_its_rows() -> None:
    """docs/faults.md's bad-input table has a row per case of tests/test_faults_inputs.py, in
    order, and the count it states is the number of rows."""
    from tests.test_faults_inputs import CASES

    text = (REPO / "docs" / "faults.md").read_text(encoding="utf-8")
    table = text.split("\n| bad input |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:] if line.startswith("|")]
    stated = re.search(r"`tests/test_faults_inputs\.py`, (\d+) cases", text)
    assert stated, "docs/faults.md: no case count beside tests/test_faults_inputs.py"
    assert int(stated.group(1)) == len(rows), f"docs/faults.md says {stated.group(1)} cases"
    assert rows == [case.name for case in CASES]


def test_readme_demo_table_is_built_from_the_kept_run() -> None:
    """The README's `make demo` block is what scripts/demo_table.py renders from the demo run
    kept in docs/demo/ (format_table and the gates), so the figures cannot drift from it."""
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_the_shipped_calibrations_figures_in_the_docs_are_the_files() -> None:
    """docs/commands.md's figures of the shipped calibration are rendered from its file by
    scripts/calibration_facts.py; a changed file with unchanged docs fails here."""
    import json

    sys.path.insert(0, str(REPO / "scripts"))
    import calibration_facts

    text = calibration_facts.DOCS.read_text(encoding="utf-8")
    shipped = [json.loads(f.read_text(encoding="utf-8")) for f in calibration_facts.SHIPPED]
    assert [c["judge"]["fingerprint"]["dtype"] for c in shipped] == ["bfloat16", "float32"]
    assert calibration_facts.render(shipped) in text
    shipped[-1]["threshold"] = 0.31  # a recalibration the docs did not follow
    assert calibration_facts.render(shipped) not in text
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "calibration_facts.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_kept_demo_run_is_the_makefiles_demo() -> None:
    """docs/demo/ keeps a run of the demo the Makefile runs: its pipelines in order, its gates,
    DEMO_LIMIT questions each (change one of them and the demo is to be run and kept again)."""
    import json

    audit = json.loads((REPO / "docs" / "demo" / "audit.json").read_text(encoding="utf-8"))
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    pipelines = re.search(r"^DEMO_PIPELINES\s*:=\s*(.+)$", makefile, flags=re.M)
    gates = re.search(r"^DEMO_GATES\s*:=\s*(.+)$", makefile, flags=re.M)
    limit = re.search(r"^DEMO_LIMIT\s*:=\s*(\d+)$", makefile, flags=re.M)
    assert pipelines and gates and limit, "Makefile: DEMO_PIPELINES, DEMO_GATES, DEMO_LIMIT"
    assert audit["pipelines"] == pipelines.group(1).split()
    assert audit["gates"] == re.findall(r"--gate '([^']+)'", gates.group(1))
    for name in audit["pipelines"]:
        summary = json.loads(
            (REPO / "docs" / "demo" / name / "summary.json").read_text(encoding="utf-8")
        )
        assert summary["pipeline"] == name
        assert summary["requests"] == int(limit.group(1)), f"{name}: not DEMO_LIMIT questions"
