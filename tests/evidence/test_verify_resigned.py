"""What `verify` proves of a bundle its own key re-signed: a key holder who edits files or the
predicate, writes the statement again with matching digests and signs it again with the same
key gets no "verified" for anything the bundle's records do not give (issue 48).

`resign` is the bundler's own path (`bag_tag_files`, `statement`, `canonical_json`,
`sign_payload`, `tar_bytes`, as `build.write_bundle` composes them): with no change it gives the
bundle's bytes back, so each refusal below comes from the edit alone."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.evidence.bag import BAG_INFO, ENVELOPE, bag_tag_files, read_tar, tar_bytes
from auditor.evidence.build import epoch_of
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, sign_payload
from auditor.evidence.keys import load_private_key
from auditor.evidence.statement import statement
from tests.evidence.conftest import PASSPHRASE
from tests.evidence.test_bundle_inputs import _reviewed_run, bundle

Change = Callable[[dict[str, bytes], dict[str, Any]], None]


def resign(source: Path, key: Path, out: Path, change: Change | None = None) -> Path:
    """The bundle at `source` with `change(payload, predicate)` applied, its tag files and
    statement written again over the changed files and signed again by `key` (the bundler's
    key, as the bundler signs: role auditor, at the audit's end)."""
    files = read_tar(source)
    envelope = Envelope.from_bytes(files.pop(ENVELOPE))
    predicate = json.loads(envelope.payload)["predicate"]
    payload = {name: data for name, data in files.items() if name.startswith("data/")}
    if change is not None:
        change(payload, predicate)
    agent = re.search(r"^Bag-Software-Agent: (.*)$", files[BAG_INFO].decode(), re.M)
    assert agent is not None
    end = str(predicate["audit_period"]["end"])
    subjects = {**payload, **bag_tag_files(payload, agent[1], end[:10])}
    body = canonical_json(statement(subjects, predicate))
    private = load_private_key(key, PASSPHRASE.encode())
    signature = sign_payload(private, PAYLOAD_TYPE, body, "auditor", end)
    signed = Envelope(PAYLOAD_TYPE, body, (signature,))
    out.write_bytes(tar_bytes({**subjects, ENVELOPE: signed.to_bytes()}, epoch_of(end)))
    return out


def verify(out: Path, key: Path) -> Result:
    return CliRunner().invoke(cli, ["verify", str(out), "--key", f"{key}.pub"])


def refused(done: Result, *said: str) -> None:
    """Exit 1, one line, naming each of `said`, and no "verified"."""
    assert done.exit_code == 1, done.output
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, done.stderr
    for text in said:
        assert text in errors[0], errors[0]
    assert "verified" not in done.stdout


def test_resign_without_a_change_gives_the_bundle_back(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    again = resign(bundled, key, tmp_path / "same.tar")
    assert again.read_bytes() == bundled.read_bytes()
    assert verify(again, key).exit_code == 0


def _run(predicate: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(r for r in predicate["runs"] if r["pipeline"] == name)
    return found


def _report_with_another_rate(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    payload["data/report.html"] = b"<p>hallucinated claims: 3.9 %</p>\n"


def _summary_edited(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    summary = {"pipeline": "sloppy", "metrics": {"hallucination_rate": {"value": 0.039}}}
    payload["data/runs/sloppy/summary.json"] = json.dumps(summary).encode()


def _rate_in_the_predicate(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    _run(predicate, "sloppy")["figures"]["metrics"]["hallucination_rate"]["value"] = 0.039


def _reviewers_invented(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    _run(predicate, "good")["reviewers"] = [
        {"name": "Eve", "role": "first", "labels": 40, "first": None, "last": None}
    ]


def _labels_invented(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    predicate["labels"] = {
        "file": "data/labels/labels.jsonl",
        "sha256": "0" * 64,
        "count": 40,
        "outside_sample": "refuse",
    }


def _another_judge(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    _run(predicate, "sloppy")["judge"]["identity"]["name"] = "gpt-4o"


def _a_run_omitted(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    predicate["runs"] = [r for r in predicate["runs"] if r["pipeline"] != "sloppy"]


def _a_run_added(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    for name in [n for n in payload if n.startswith("data/runs/good/")]:
        payload[name.replace("/good/", "/extra/")] = payload[name]


def _a_gate_invented(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    gate = {"gate": "hallucination_rate<=0.05", "pipeline": "sloppy", "value": 0.0, "passed": True}
    predicate["gates"] = [gate]


def _period_moved(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    predicate["audit_period"]["start"] = "2020-01-01T00:00:00+00:00"


def _a_field_nothing_gives(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    predicate["tool"] = {"name": "auditor", "version": "9.9.9"}


def _documents_miscounted(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    _run(predicate, "good")["knowledge_base"]["documents"] = 99


def _questions_swapped(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    (name,) = [n for n in payload if n.startswith("data/questions/")]
    payload[name] = b'{"id": "q1", "question": "Another question?"}\n'


def _model_renamed(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    _run(predicate, "good")["system"]["model"]["name"] = "gpt-4o"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_report_with_another_rate, "data/report.html: in the bundle, but no field"),
        (_summary_edited, "data/runs/sloppy/summary.json: derived from the records"),
        (_rate_in_the_predicate, "runs[sloppy].figures.metrics.hallucination_rate.value: 0.039"),
        (_reviewers_invented, "runs[good].reviewers: 1 entries in the statement, 0 recomputed"),
        (_labels_invented, "labels: {"),
        (_another_judge, "runs[sloppy].judge.identity.name: 'gpt-4o' in the statement"),
        (_a_run_omitted, "data/runs/sloppy: a run in the bundle that the statement's predicate"),
        (_a_run_added, "data/runs/extra: a run in the bundle that the statement's predicate"),
        (_a_gate_invented, "gates: 1 entries in the statement, 2 recomputed"),
        (_period_moved, "audit_period.start: '2020-01-01T00:00:00+00:00' in the statement"),
        (_a_field_nothing_gives, "tool: {'name': 'auditor'"),
        (_documents_miscounted, "runs[good].knowledge_base.documents: 99 in the statement, 2"),
        (_questions_swapped, "not the question set data/runs/good/manifest.json names"),
        (_model_renamed, "runs[good].system.model.name: 'gpt-4o' in the statement"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_a_bundle_resigned_by_its_own_key_over_an_edit_is_refused(
    bundled: Path, key: Path, tmp_path: Path, change: Change, said: str
) -> None:
    refused(verify(resign(bundled, key, tmp_path / "x.tar", change), key), said)


def test_tag_files_that_are_not_what_the_payload_gives_are_refused(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    """manifest-sha256.txt re-signed with a line that lies (bagit would refuse the bag)."""
    files = read_tar(bundled)
    envelope = Envelope.from_bytes(files.pop(ENVELOPE))
    predicate = json.loads(envelope.payload)["predicate"]
    lie = files["manifest-sha256.txt"].replace(b"data/runs/good/records", b"data/runs/good/recordz")
    files["manifest-sha256.txt"] = lie
    body = canonical_json(statement(files, predicate))
    end = predicate["audit_period"]["end"]
    private = load_private_key(key, PASSPHRASE.encode())
    signed = Envelope(
        PAYLOAD_TYPE, body, (sign_payload(private, PAYLOAD_TYPE, body, "auditor", end),)
    )
    out = tmp_path / "t.tar"
    out.write_bytes(tar_bytes({**files, ENVELOPE: signed.to_bytes()}, 0))
    refused(verify(out, key), "manifest-sha256.txt: not the BagIt tag file the payload gives")


def test_a_document_that_no_longer_matches_the_index_manifest_is_refused(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path
) -> None:
    out = tmp_path / "docs.tar"
    done = bundle(audited, key, out, passphrase, "--with-documents")
    assert done.exit_code == 0, done.output
    assert verify(out, key).exit_code == 0
    documents = sorted(n for n in read_tar(out) if "/documents/" in n)
    assert documents

    def edit(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        payload[documents[0]] += b"\nAnd a sentence the index never saw.\n"

    refused(
        verify(resign(out, key, tmp_path / "x.tar", edit), key),
        f"{documents[0]}: its sha256 differs from the one",
    )

    def drop(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        del payload[documents[0]]

    refused(verify(resign(out, key, tmp_path / "y.tar", drop), key), "missing from the bundle")


@pytest.fixture
def labelled(checked: Path, key: Path, passphrase: str, tmp_path: Path) -> Path:
    """A bundle of a run with people's labels of its drawn sample (Ana's, 2026-12-06), and a
    gate that fails."""
    labels, _ = _reviewed_run(checked, tmp_path)
    out = tmp_path / "labelled.tar"
    gate = ("--gate", "reviewed_hallucination_rate<=0.01")
    done = bundle([checked], key, out, passphrase, "--labels", labels, *gate)
    assert done.exit_code == 1 and "FAIL reviewed_hallucination_rate" in done.output, done.output
    return out  # written all the same: the signed evidence of a failed audit


def _labels_lines(payload: dict[str, bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in payload["data/labels/labels.jsonl"].splitlines()]


def _write_labels(payload: dict[str, bytes], rows: list[dict[str, Any]]) -> None:
    payload["data/labels/labels.jsonl"] = "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_labels_and_reviewers_a_key_holder_changes_are_refused(
    labelled: Path, key: Path, tmp_path: Path
) -> None:
    assert verify(labelled, key).exit_code == 0

    def count(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["labels"]["count"] = 40

    refused(verify(resign(labelled, key, tmp_path / "a.tar", count), key), "labels.count: 40")

    def reviewer(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["runs"][0]["reviewers"][0]["name"] = "Eve"

    refused(
        verify(resign(labelled, key, tmp_path / "b.tar", reviewer), key),
        "runs[run].reviewers[0].name: 'Eve' in the statement, 'Ana' recomputed",
    )

    def renamed(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        _write_labels(payload, [row | {"reviewer": "Eve"} for row in _labels_lines(payload)])

    refused(
        verify(resign(labelled, key, tmp_path / "c.tar", renamed), key),
        "runs[run].reviewers[0].name: 'Ana' in the statement, 'Eve' recomputed",
    )

    def outside(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["labels"]["outside_sample"] = "ignore"

    refused(verify(resign(labelled, key, tmp_path / "d.tar", outside), key), "'ignore'")

    def passed(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        assert predicate["gates"][0]["passed"] is False
        predicate["gates"][0]["passed"] = True

    refused(
        verify(resign(labelled, key, tmp_path / "e.tar", passed), key),
        "gates[0].passed: True in the statement, False recomputed",
    )


class _Clock(datetime):
    """This machine's clock set back to 2020: `datetime.now` says 2020-01-01."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime(2020, 1, 1, tzinfo=tz)


def test_labels_are_read_as_of_the_statement_not_the_verifiers_clock(
    labelled: Path, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verifier whose clock says 2020 verifies a bundle labelled in 2026; a label dated after
    the statement's audit end (the bundler's signing time) is refused whatever the clock."""
    with monkeypatch.context() as patch:
        patch.setattr("auditor.labels.datetime", _Clock)
        done = verify(labelled, key)
    assert done.exit_code == 0, done.output

    def later(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
        end = datetime.fromisoformat(predicate["audit_period"]["end"])
        when = (end + timedelta(days=1)).isoformat()
        _write_labels(payload, [row | {"labelled_at": when} for row in _labels_lines(payload)])

    refused(
        verify(resign(labelled, key, tmp_path / "later.tar", later), key),
        'data/labels/labels.jsonl:1: "labelled_at"',
        "the time the labels are read as of",
    )


def test_the_audit_end_covers_the_labels_so_the_bundler_signs_after_them(
    checked: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    """Labels made after the check: the audit's end (the bundler's signing time) is the last
    label's time, and the bundle verifies."""
    labels, _ = _reviewed_run(checked, tmp_path)
    check = json.loads((checked / "check.json").read_text())
    after = datetime.fromisoformat(check["finished_at"]) + timedelta(seconds=30)
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    late = after.isoformat().replace("+00:00", "Z")
    labels.write_text("".join(json.dumps(r | {"labelled_at": late}) + "\n" for r in rows))
    out = tmp_path / "a.tar"
    done = bundle([checked], key, out, passphrase, "--labels", labels)
    assert done.exit_code == 0, done.output
    envelope = Envelope.from_bytes(read_tar(out)[ENVELOPE])
    assert json.loads(envelope.payload)["predicate"]["audit_period"]["end"] == late
    assert envelope.signatures[0].signed_at == late
    with tarfile.open(out) as tar:
        assert {m.mtime for m in tar.getmembers()} == {epoch_of(late)}
    assert verify(out, key).exit_code == 0


def test_a_reviewer_does_not_countersign_a_statement_its_records_do_not_give(
    bundled: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    changed = resign(bundled, key, tmp_path / "x.tar", _another_judge)
    before = changed.read_bytes()
    args = ["sign", str(changed), "--key", str(key), "--role", "reviewer"]
    done = CliRunner().invoke(cli, [*args, "--passphrase-env", passphrase])
    assert done.exit_code == 1, done.output
    assert "runs[sloppy].judge.identity.name" in done.stderr and "not signed" in done.stderr
    assert changed.read_bytes() == before
