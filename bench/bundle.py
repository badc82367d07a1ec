"""Bundle size, bundle time and verify time for a run of N answers checked by the fake judge.

    .venv/bin/python bench/bundle.py [--answers 1000] [--rounds 3] [--name bundle-DATE]

Makes, in a temporary dir, the answers (every third one with a wrong figure), a run dir of
them checked by the fake judge (`auditor check --answers`, no engine), a review sample of
100 with people's labels, and a demo-sized pair of runs (8 answers each, as `make demo`
audits); then times `auditor bundle` and `auditor verify` on each, in-process, `--rounds`
times. The judge is fake, so the figures are the bundle's own cost: what a real audit adds
to its (minutes of) judging. Writes bench/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from click.testing import CliRunner

from auditor.cli import cli
from auditor.evidence.keys import generate_key
from auditor.files import utc_now
from auditor.review import check_fingerprint, run_fingerprint
from auditor.testing import FakeJudge
from bench.harness import spread, write_result

PASSPHRASE = "bench passphrase"
CHUNKS = [
    "The T{n} thermostat ships with a mounting plate and four screws.",
    "Unopened T{n} thermostats can be returned within {m} days of delivery.",
    "The T{n} warranty is void if the housing is opened.",
]


def answers(count: int, prefix: str) -> list[dict[str, Any]]:
    """`count` answers, each to its own question; every third gives a figure its chunk does
    not (labelled hallucinated)."""
    rows = []
    for k in range(count):
        chunks = [c.format(n=k + 2, m=30 + k) for c in CHUNKS]
        wrong = k % 3 == 0
        rows.append(
            {
                "id": f"{prefix}{k}",
                "question": f"What are the return terms of the T{k + 2}?",
                "contexts": chunks,
                "answer": chunks[1].replace(str(30 + k), str(90 + k)) if wrong else chunks[1],
                "hallucinated": wrong,
            }
        )
    return rows


def invoke(*args: str | Path) -> str:
    done = CliRunner().invoke(cli, [str(a) for a in args])
    if done.exit_code != 0:
        raise SystemExit(f"auditor {args[0]} failed: {done.output}")
    return done.stdout


def checked_run(root: Path, name: str, count: int, review: int) -> tuple[Path, Path | None]:
    """A run dir of `count` fake-judged answers, and labels of a review sample of `review`."""
    rows = answers(count, f"{name}-")
    source = root / f"{name}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = root / name
    invoke("check", "--answers", source, "--out", run, "-q")
    if not review:
        return run, None
    invoke("review", run, "--sample", str(review), "--seed", "1")
    drawn = [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]
    manifest = json.loads((run / "manifest.json").read_text())
    check = json.loads((run / "check.json").read_text())
    truth = {r["id"]: r["hallucinated"] for r in rows}
    labels = root / f"{name}.labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps(
                {
                    "id": ident,
                    "pipeline": name,
                    "fingerprint": run_fingerprint(manifest),
                    "check_fingerprint": check_fingerprint(check),
                    "hallucinated": truth[ident],
                    "reviewer": "Ana",
                    "labelled_at": utc_now(),
                }
            )
            + "\n"
            for ident in drawn
        ),
        encoding="utf-8",
    )
    return run, labels


def timed(
    root: Path, key: Path, runs: list[Path], labels: Path | None, rounds: int
) -> dict[str, Any]:
    """Bundle and verify `rounds` times: seconds of each, and the bundle's size."""
    bundle_s, verify_s, sizes = [], [], []
    for n in range(rounds):
        out = root / f"b{n}-{runs[0].name}.tar"
        extra = ["--labels", str(labels)] if labels else []
        started = time.perf_counter()
        invoke(
            "bundle", *runs, "--key", key, "--out", out, "--passphrase-env", "BENCH_PASS", *extra
        )
        bundle_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        said = invoke("verify", out, "--key", f"{key}.pub")
        verify_s.append(time.perf_counter() - started)
        assert said.splitlines()[-1].startswith("verified"), said
        sizes.append(out.stat().st_size / 1e6)
    return {"bundle_s": spread(bundle_s), "verify_s": spread(verify_s), "size_mb": spread(sizes)}


def lscpu_facts() -> dict[str, Any]:
    """The CPU model as `lscpu` names it, and whether the CPU has avx512_bf16."""
    try:
        said = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        said = ""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in said.splitlines()
            if line.startswith("Model name")
        ),
        None,
    )
    return {"lscpu_model": model, "avx512_bf16": "avx512_bf16" in said.split()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default=f"bundle-{time.strftime('%Y-%m-%d')}")
    args = parser.parse_args()
    os.environ["BENCH_PASS"] = PASSPHRASE
    with (
        tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp,
        mock.patch("auditor.verify.judges.make_judge", lambda config: FakeJudge()),
    ):
        root = Path(tmp)
        os.environ["AUDITOR_HOME"] = str(root / "home")
        key = root / "bench.key"
        generate_key(key, PASSPHRASE.encode())
        started = time.perf_counter()
        big, labels = checked_run(root, "big", args.answers, review=min(100, args.answers))
        check_s = time.perf_counter() - started
        demo = [checked_run(root, name, 8, review=0)[0] for name in ("demo-a", "demo-b")]
        figures = {
            f"{args.answers} answers, {min(100, args.answers)} labels": timed(
                root, key, [big], labels, args.rounds
            ),
            "demo-sized: 2 runs of 8 answers": timed(root, key, demo, None, args.rounds),
        }
    for setting, found in figures.items():
        print(
            f"{setting}: bundle {found['bundle_s']['median']:.2f} s, verify "
            f"{found['verify_s']['median']:.2f} s, size {found['size_mb']['median']:.2f} MB"
        )
    write_result(
        args.name,
        "bundle",
        figures,
        note=f"fake judge (no engine); making and fake-checking the {args.answers} answers "
        f"took {check_s:.1f} s; in-process CLI, median of {args.rounds} rounds",
        **lscpu_facts(),
    )


if __name__ == "__main__":
    main()
