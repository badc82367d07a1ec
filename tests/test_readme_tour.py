"""Every command of the README's tour runs: the commands of `make demo`'s recipe,
then each shell block of README.md marked `<!-- tour -->`, in order, through the CLI against
the demo's outputs, with fakes where an engine would start (embedder, generator, judge). A
path or flag that drifts fails here, naming the README line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import traceback
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import EmbedderConfig
from auditor.files import utc_now
from auditor.generate.vllm_offline import VLLMGenerator
from auditor.review import run_fingerprint
from auditor.testing import FakeEmbedder, FakeGenerator, FakeJudge

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TOUR_MARK = "<!-- tour -->"
AUDITOR = ("auditor", ".venv/bin/auditor")

Command = tuple[str, int, str]  # (file, line, command with its continuations joined)


def _joined(lines: list[tuple[int, str]], source: str) -> list[Command]:
    """Shell lines (number, text) -> commands: comments and blank lines skipped, backslash
    continuations joined onto the line they continue."""
    commands: list[Command] = []
    pending: tuple[int, str] | None = None
    for number, raw in lines:
        text = raw.strip()
        if pending is None and (not text or text.startswith("#")):
            continue
        start, before = pending if pending is not None else (number, "")
        if text.endswith("\\"):
            pending = (start, f"{before}{text[:-1].rstrip()} ")
            continue
        pending = None
        commands.append((source, start, f"{before}{text}"))
    assert pending is None, f"{source}:{pending[0]}: a continuation that never ends"
    return commands


def demo_commands() -> list[Command]:
    """The commands of the Makefile's `demo` recipe, as make prints them (its `setup`
    dependency left out: the tour runs in the test's environment)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    printed = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "setup", "demo"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    commands = _joined(list(enumerate(printed.splitlines(), 1)), "make -n demo")
    assert commands, "make -n demo printed no command"
    return commands


def tour_commands(readme: Path | None = None) -> list[Command]:
    """The commands of every shell block that follows a `<!-- tour -->` line, in order."""
    readme = readme or README
    lines = readme.read_text(encoding="utf-8").splitlines()
    commands: list[Command] = []
    blocks = 0
    for number, line in enumerate(lines, 1):
        if line.strip() != TOUR_MARK:
            continue
        fence = number  # 0-based index of the line after the mark
        while fence < len(lines) and not lines[fence].strip():
            fence += 1
        assert fence < len(lines) and lines[fence].strip() in ("```bash", "```sh"), (
            f"{readme.name}:{number}: {TOUR_MARK} is not followed by a ```bash block"
        )
        end = fence + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{readme.name}:{fence + 1}: the block never closes"
        body = [(n + 1, lines[n]) for n in range(fence + 1, end)]
        commands += _joined(body, readme.name)
        blocks += 1
    assert blocks, f"{readme.name} has no {TOUR_MARK} block"
    return commands


class _Engine(FakeGenerator):
    """A started in-process engine (fake): what `VLLMGenerator.from_config` returns, shared
    with the judge when a pipeline's engine is the judge's (the demo's 1.5B)."""

    def sharing(self, cfg: Any) -> _Engine:
        return self


@pytest.fixture
def demo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory like the checkout's (corpora/ and pipelines/ are the repo's) with
    fake engines: no weights are resolved, prepared or loaded."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("corpora", "pipelines"):
        (work / name).symlink_to(REPO / name, target_is_directory=True)
    monkeypatch.chdir(work)
    for variable in ("AUDITOR_HISTORY", "AUDITOR_PIPELINES"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AUDITOR_KEY_PASSPHRASE", "tour passphrase")  # the bundle's key

    def embedder(config: EmbedderConfig) -> FakeEmbedder:
        return FakeEmbedder(name=config.model)  # the name the pipelines expect of the index

    monkeypatch.setattr("auditor.ingest.embed.load_embedder", embedder)
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.verify.judges.GeneratorJudge", lambda engine: FakeJudge())
    monkeypatch.setattr(VLLMGenerator, "from_config", classmethod(lambda cls, cfg, **_: _Engine()))
    monkeypatch.setattr("auditor.audit.prepare_model", lambda name, **_: None)
    return work


def _write_page_labels(path: Path, run_dirs: list[Path]) -> None:
    """labels.jsonl as the review page downloads it: one line per drawn answer of each run."""
    rows = []
    for run_dir in run_dirs:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        drawn = json.loads((run_dir / "review.json").read_text(encoding="utf-8"))["sample"]
        for number, answer in enumerate(drawn):
            rows.append(
                {
                    "id": answer["id"],
                    "pipeline": manifest["pipeline"]["name"],
                    "fingerprint": run_fingerprint(manifest),
                    "hallucinated": number % 3 == 0,
                    "reviewer": "Ana",
                    "labelled_at": utc_now(),
                }
            )
    assert rows, f"{path}: no drawn answer in {', '.join(map(str, run_dirs))} to label"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _auditor_words(words: list[str]) -> list[str]:
    """A command's words, `python -m auditor ...` (as the Makefile runs it) read as `auditor ...`."""
    if len(words) > 2 and words[0].endswith("python") and words[1:3] == ["-m", "auditor"]:
        return ["auditor", *words[3:]]
    return words


def _run(command: Command) -> None:
    source, line, text = command
    where = f"{source}:{line}: {text}"
    words = _auditor_words(shlex.split(text, comments=True))
    assert words and words[0] in AUDITOR, f"{where}\n  is no auditor command the tour can run"
    args = words[1:]
    runs = [Path(a) for a in args if (Path(a) / "manifest.json").is_file()]
    for arg in args:
        if Path(arg).name == "labels.jsonl" and not Path(arg).exists():
            _write_page_labels(Path(arg), runs)
    result = CliRunner().invoke(cli, args)
    # 0, or 1 from a gate that fails (docs/commands.md: exit codes); anything else is broken
    gate_failed = "--gate" in args and "Error: gate failed" in result.stderr
    if result.exit_code == 0 or (result.exit_code == 1 and gate_failed):
        return
    trace = ""
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        trace = "".join(traceback.format_exception(*result.exc_info))
    pytest.fail(f"{where}\n  exited {result.exit_code}:\n{result.output}{trace}", pytrace=False)


def test_tour_blocks_are_found() -> None:
    """The markers are where the README says: the step-by-step commands and the review loop;
    the tour ingests what `make demo` ingests, into the same index (a folder that also works,
    such as the corpus's parent, would build another index)."""
    commands = [text for _, _, text in tour_commands()]

    def ingest_args(text: str) -> list[str] | None:
        words = _auditor_words(text.split())
        return words[words.index("ingest") + 1 :] if "ingest" in words[:2] else None

    ingests = [a for _, _, text in demo_commands() if (a := ingest_args(text)) is not None]
    assert ingests, "the Makefile's demo ingests nothing"
    for text in commands:
        if (args := ingest_args(text)) is not None:
            assert args in ingests, f"the tour ingests otherwise than make demo: {text}"
    assert any(text.startswith("auditor review reports/demo/") for text in commands)
    assert any("--labels labels.jsonl" in text for text in commands)


def test_every_readme_tour_command_runs_after_the_demo(demo_dir: Path) -> None:
    """`make demo`'s commands, then the README's tour blocks in order, each exits 0 (or 1
    from a failing gate) in a fresh directory with the repo's corpora and pipelines."""
    for command in demo_commands():
        _run(command)
    assert (demo_dir / "reports" / "demo" / "report.html").is_file()
    for command in tour_commands():
        _run(command)
    # the tour ends with a bundle that verifies
    done = CliRunner().invoke(
        cli, ["verify", "reports/audit.tar", "--key", "reports/audit.key.pub"]
    )
    assert done.exit_code == 0 and "verified" in done.stdout, done.output
