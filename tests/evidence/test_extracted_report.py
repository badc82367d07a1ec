"""The report of an extracted bundle names its signers only over the files and the figures they
signed: a file changed, added or missing, a run dir from elsewhere, or figures computed from
other labels or gates are said on its first screen instead (issue 48)."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from html import unescape
from pathlib import Path

from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.evidence.bag import ENVELOPE
from auditor.evidence.dsse import Envelope
from tests.evidence.test_bundle_inputs import _reviewed_run, bundle


def extract(bundled: Path, where: Path) -> Path:
    with tarfile.open(bundled) as tar:
        tar.extractall(where, filter="data")
    return where


def report(run_dirs: list[Path], html: Path, *extra: str | Path) -> Result:
    args = ["report", *map(str, run_dirs), "--out", str(html)]
    args += ["--history", str(html.with_suffix(".sqlite")), *map(str, extra)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code in (0, 1), done.output  # 1: a gate failed
    return done


def first_screen(html: Path) -> str:
    """The report's header, unescaped: what a reader sees before scrolling."""
    page = html.read_text()
    return unescape(page[page.index("<header>") : page.index("</header>")])


def signer_of(bag: Path) -> str:
    return Envelope.from_bytes((bag / ENVELOPE).read_bytes()).signatures[0].keyid[:16]


def test_the_signers_are_named_over_the_files_they_signed(bundled: Path, tmp_path: Path) -> None:
    bag = extract(bundled, tmp_path / "bag")
    html = tmp_path / "r.html"
    report([bag / "data/runs/good", bag / "data/runs/sloppy"], html)
    header = first_screen(html)
    assert f"{signer_of(bag)}</code> as auditor" in header
    assert "whose files are those its statement lists" in header
    # the report wrote summary.json into the run dirs: derived, and no reason to doubt them
    assert (bag / "data/runs/good/summary.json").is_file()
    report([bag / "data/runs/good", bag / "data/runs/sloppy"], html)
    assert f"{signer_of(bag)}</code> as auditor" in first_screen(html)


def test_a_changed_added_or_missing_file_is_said_first_and_no_signer_is_named(
    bundled: Path, tmp_path: Path
) -> None:
    bag = extract(bundled, tmp_path / "bag")
    records = bag / "data/runs/sloppy/records.jsonl"
    records.write_text(records.read_text().replace('"answer": "', '"answer": "Surely ', 1))
    (bag / "data/runs/good/notes.txt").write_text("slipped in\n")
    (next((bag / "data/questions").iterdir())).unlink()
    html = tmp_path / "r.html"
    report([bag / "data/runs/good", bag / "data/runs/sloppy"], html)
    header = first_screen(html)
    assert 'id="bundle" class="verdict-banner fail"' in header
    assert "no signature covers this report" in header
    assert "data/runs/sloppy/records.jsonl: changed (sha256 differs from the statement)" in header
    assert "data/runs/good/notes.txt: not in the statement (added)" in header
    assert re.search(r"data/questions/[0-9a-f]{16}\.jsonl: missing", header)
    assert signer_of(bag) not in html.read_text()
    assert " as auditor" not in header


def test_a_run_dir_from_elsewhere_is_said(
    bundled: Path, audited: list[Path], tmp_path: Path
) -> None:
    bag = extract(bundled, tmp_path / "bag")
    elsewhere = Path(shutil.copytree(audited[1], tmp_path / "sloppy"))
    html = tmp_path / "r.html"
    report([bag / "data/runs/good", elsewhere], html)
    header = first_screen(html)
    assert f"{elsewhere}: not a run dir of this bundle" in header
    assert signer_of(bag) not in html.read_text()


def test_the_bundles_labels_and_gates_are_taken_and_others_are_said(
    checked: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    labels, _ = _reviewed_run(checked, tmp_path)
    out = tmp_path / "a.tar"
    gate = "reviewed_hallucination_rate<=0.9"
    done = bundle([checked], key, out, passphrase, "--labels", labels, "--gate", gate)
    assert done.exit_code == 0, done.output
    bag = extract(out, tmp_path / "bag")
    run = bag / "data/runs/run"
    html = tmp_path / "r.html"
    # no flags: the bundle's labels and gate, and the statement's figures
    done = report([run], html)
    assert "from the bundle's statement: --labels " in done.stdout
    assert f"--gate '{gate}'" in done.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reviewed"]["labels"] == 15
    assert f"{signer_of(bag)}</code> as auditor" in first_screen(html)
    # fewer labels than signed: other figures, said instead of the signers
    rows = (bag / "data/labels/labels.jsonl").read_text().splitlines()
    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("\n".join(rows[:10]) + "\n")
    report([run], html, "--labels", fewer)
    header = first_screen(html)
    assert "runs[run].figures" in header and "no signature covers this report" in header
    assert signer_of(bag) not in header
    # another gate than the signed one
    report([run], html, "--gate", "hallucination_rate<=0.9")
    header = first_screen(html)
    assert "gates[0].gate: 'reviewed_hallucination_rate<=0.9' in the statement" in header
    assert signer_of(bag) not in header
