"""`auditor keygen`, `bundle`, `sign`, `verify`: the signed, self-verifying audit bundle
(auditor.evidence; docs/compliance.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from auditor.cli.options import (
    calibration_option,
    labels_option,
    load_calibration_option,
    load_labels_option,
)
from auditor.cli.report_cmd import exit_on_failed_gates, gate_option
from auditor.errors import AuditorError, BadInput
from auditor.evidence.build import (
    bundle_member_count,
    check_bundle_output,
    plan_bundle,
    write_bundle,
)
from auditor.evidence.keys import (
    fingerprint,
    generate_key,
    load_private_key,
    load_public_key,
    public_key_path,
    read_passphrase_env,
)
from auditor.evidence.sign import countersign, signing_target
from auditor.evidence.verify import VerificationFailed, verify_bundle
from auditor.files import Read, refuse_output_on_input, utc_now
from auditor.gates import parse_gate
from auditor.store import CHECKS, MANIFEST, RECORDS

__all__ = ["bundle", "keygen", "passphrase_option", "read_passphrase", "sign", "verify"]

F = TypeVar("F", bound=Callable[..., Any])


def passphrase_option(func: F) -> F:
    return click.option(
        "--passphrase-env",
        "passphrase_env",
        metavar="NAME",
        default=None,
        help="Read the key's passphrase from this environment variable (CI) instead of a prompt.",
    )(func)


def read_passphrase(env_name: str | None, confirm: bool = False) -> bytes:
    """The passphrase: from the environment variable named, else asked on the terminal."""
    if env_name:
        return read_passphrase_env(env_name)
    value = click.prompt(
        "Passphrase of the key", hide_input=True, confirmation_prompt=confirm, err=True
    )
    return str(value).encode("utf-8")


@click.command()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="The private key file to write (KEY; KEY.pub beside it).",
)
@passphrase_option
@click.option("--force", is_flag=True, help="Replace KEY and KEY.pub when they exist.")
def keygen(out: Path, passphrase_env: str | None, force: bool) -> None:
    """Make an Ed25519 key pair to sign audit bundles with.

    KEY is the private key, encrypted with the passphrase (PKCS#8 PEM, mode 0600); KEY.pub the
    public key to hand to whoever verifies. Prints the key's fingerprint.
    """
    # KEY and KEY.pub are two files: not one through a link (before the passphrase is asked)
    refuse_output_on_input(out, "--out", [Read("KEY.pub", public_key_path(out), written=True)])
    passphrase = read_passphrase(passphrase_env, confirm=True)
    found = generate_key(out, passphrase, force)
    click.echo(f"key {out} (public: {public_key_path(out)}); fingerprint {found}")


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The private key to sign with (auditor keygen).",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="The bundle to write (a .tar).",
)
@passphrase_option
@calibration_option("report")
@labels_option
@gate_option
@click.option(
    "--index",
    "index_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The index dir the runs were run against, where it is not at the path their manifests record.",
)
@click.option(
    "--questions",
    "questions_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="The question set a run asked, where it is not at the path its manifest records "
    "(checked against the recorded sha256); repeat for runs of different sets.",
)
@click.option(
    "--with-documents",
    "documents",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[DIR]",
    help="Also put the indexed documents themselves in the bundle (default: their hashes "
    "only), read from DIR, else from the corpus dir the index records. Give DIR after the "
    "run dirs, or as --with-documents=DIR.",
)
@click.option("--force", is_flag=True, help="Replace --out when it exists.")
def bundle(
    run_dirs: tuple[Path, ...],
    key_path: Path,
    out: Path,
    passphrase_env: str | None,
    calibration_name: str | None,
    labels_path: Path | None,
    labels_outside: str,
    gate_texts: tuple[str, ...],
    index_dir: Path | None,
    questions_paths: tuple[Path, ...],
    documents: str | None,
    force: bool,
) -> None:
    """Bundle checked run dirs into one signed, self-verifying archive.

    A BagIt bag in a plain tar: the run dirs' records, the labels and calibration the figures
    used, the index manifest, the questions; and an in-toto statement of every file's sha256
    and the audit's figures, signed in a DSSE envelope. The same inputs give the same bytes.
    Verify with `auditor verify OUT --key KEY.pub`.

    The index, the questions and the documents are found from the run's manifest wherever
    this runs (each checked against its recorded sha256), or refused naming the option that
    gives them. With --gate, prints each gate's verdict; a failed gate exits 1 with the
    bundle written (the signed evidence of the failed audit).
    """
    gates = [parse_gate(text) for text in gate_texts]
    calibration = load_calibration_option(calibration_name)
    labels = load_labels_option(labels_path)
    documents_dir = Path(documents) if documents else None
    if documents_dir is not None:
        _refuse_run_dir_as_corpus(documents_dir)
    reads = [
        *(Read("RUN_DIR", d, folder=True) for d in run_dirs),
        Read("--labels", labels_path),
        Read("--calibration", None if calibration is None else calibration.path),
        Read("--index", index_dir, folder=True),
        *(Read("--questions", q) for q in questions_paths),
        Read("--with-documents", documents_dir, folder=True),
        Read("--key", key_path),
    ]
    check_bundle_output(out, force, reads)
    key = load_private_key(key_path, read_passphrase(passphrase_env))
    plan = plan_bundle(
        list(run_dirs),
        calibration=calibration,
        labels=labels,
        labels_path=labels_path,
        labels_outside=labels_outside,
        gates=gates,
        index_dir=index_dir,
        with_documents=documents is not None,
        documents_dir=documents_dir,
        questions=questions_paths,
    )
    envelope = write_bundle(plan, key, out)
    for result in plan.gate_results:
        click.echo(result.describe())
    click.echo(
        f"bundle {out}: {bundle_member_count(plan)} files of {len(plan.runs)} run(s); statement "
        f"sha256 {envelope.statement_sha256}; signed by {fingerprint(key.public_key())} as "
        "auditor"
    )
    exit_on_failed_gates(plan.gate_results)  # the bundle is written: a failed audit's evidence


def _refuse_run_dir_as_corpus(documents_dir: Path) -> None:
    """A run dir given as --with-documents' DIR: the option took the first RUN_DIR."""
    if all((documents_dir / name).is_file() for name in (MANIFEST, RECORDS, CHECKS)):
        raise BadInput(
            f"--with-documents {documents_dir}: a run dir, not the corpus; give --with-documents "
            "after the run dirs, or as --with-documents=DIR"
        )


@click.command()
@click.argument("bundle_path", type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Your private key (auditor keygen).",
)
@click.option(
    "--role",
    required=True,
    type=click.Choice(("reviewer", "approver")),
    help="The role you sign in.",
)
@click.option(
    "--trust",
    "trust_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="KEY.pub",
    help="The public key of a signer already in the bundle (the bundler's first); repeat for "
    "each. Every earlier signature must hold under one of them (your own key is trusted).",
)
@passphrase_option
def sign(
    bundle_path: Path,
    key_path: Path,
    role: str,
    trust_paths: tuple[Path, ...],
    passphrase_env: str | None,
) -> None:
    """Countersign a bundle: your signature of the same statement, in a role.

    The bundle is verified first as `auditor verify` does, with the earlier signers' public
    keys given with --trust: signatures, every file's digest, the figures computed again.
    A symbolic link is followed; the bundle keeps its mode; one with other hard links is
    refused. The time recorded is this machine's clock (a signature proves who signed, not
    when).
    """
    signing_target(bundle_path)  # a missing, hard-linked or unwritable bundle: before the key
    trusted = [(str(path), load_public_key(path, "--trust")) for path in trust_paths]
    key = load_private_key(key_path, read_passphrase(passphrase_env))
    try:
        envelope = countersign(bundle_path, key, role, utc_now(), trusted)
    except VerificationFailed as exc:
        raise VerificationFailed(f"{exc}; not signed") from exc
    click.echo(
        f"signed {bundle_path} as {role} with {fingerprint(key.public_key())}; "
        f"{len(envelope.signatures)} signatures"
    )


class _JsonOnEveryExit(click.Command):
    """A command whose --json output is a JSON object on every exit: a usage error (a missing
    --key, an unknown option) prints `{"verified": false, "failure": ...}` too, before the
    usual one line on stderr and exit code 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # Click's parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if "--json" in given[: given.index("--") if "--" in given else len(given)]:
                _echo_failure(exc.format_message())
            raise


def _echo_failure(message: str) -> None:
    """verify --json's object for a bundle that does not verify (exit 1) or bad input (2)."""
    click.echo(json.dumps({"verified": False, "failure": message}, indent=2))


@click.command(cls=_JsonOnEveryExit)
@click.argument("bundle_path", type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_paths",
    required=True,
    multiple=True,
    type=click.Path(path_type=Path),
    help="A signer's public key (KEY.pub); repeat for each signer. Only these keys are trusted.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as JSON on stdout, on every exit (failures: verified false and "
    "the failure).",
)
def verify(bundle_path: Path, key_paths: tuple[Path, ...], as_json: bool) -> None:
    """Verify a bundle offline: safe members, every signature against the keys given, every
    file's digest, the file set, and every field of the statement computed again from the
    bundle's records.

    Prints one line per signer (fingerprint, role, time) and `verified`; else one line naming
    the first file, field or signature that fails, exit code 1 (2 on bad input). With --json,
    a JSON object on stdout on every exit.
    """
    try:
        keys = [(str(path), load_public_key(path)) for path in key_paths]
        done = verify_bundle(bundle_path, keys)
    except AuditorError as exc:  # VerificationFailed (exit 1) and bad input (exit 2)
        if as_json:
            _echo_failure(str(exc))
        raise
    if as_json:
        click.echo(
            json.dumps(
                {
                    "verified": True,
                    "statement_sha256": done.statement_sha256,
                    "files": done.files,
                    "signers": [s.to_json() for s in done.signers],
                    "audit_period": done.predicate.get("audit_period"),
                    "pipelines": [run.get("pipeline") for run in done.predicate["runs"]],
                },
                indent=2,
            )
        )
        return
    for signer in done.signers:
        click.echo(f"signer {signer.keyid} {signer.role} {signer.signed_at} ({signer.key})")
    click.echo(
        f"verified: statement sha256 {done.statement_sha256}; {done.files} files; every field "
        f"computed again from the records of {len(done.predicate['runs'])} run(s) (signing "
        "times are the signers' own clocks: a signature proves who, not when)"
    )
