"""The shipped calibration's figures in docs/commands.md, rendered from the calibration file.

    .venv/bin/python scripts/calibration_facts.py           # rewrite the block in the docs
    .venv/bin/python scripts/calibration_facts.py --check   # exit 1 if the block is stale

The block between the `calibration-facts` markers in docs/commands.md says what each
auditor/calibrations/qwen-1.5b-cpu-judge.DTYPE.json holds: answers, threshold, the judge's dtype,
out-of-fold answer- and claim-level sensitivity and specificity with their intervals, and
how much the correction multiplies an error. No figure in it is copied by hand; a test
(tests/test_docs.py) fails when the docs and the file disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "commands.md"
SHIPPED = sorted((REPO / "auditor" / "calibrations").glob("qwen-1.5b-cpu-judge.*.json"))
BEGIN = "<!-- calibration-facts: built by scripts/calibration_facts.py; do not edit -->"
END = "<!-- /calibration-facts -->"


def _share(level: dict[str, Any], name: str) -> str:
    low, high = level[f"{name}_interval"]
    return f"{level[name]:.3f} ({low:.3f}-{high:.3f})"


def render(calibrations: list[dict[str, Any]]) -> str:
    """The block's text (markers excluded): a paragraph per shipped file."""
    return "\n\n".join(_paragraph(calibration) for calibration in calibrations)


def _paragraph(calibration: dict[str, Any]) -> str:
    identity = calibration["judge"].get("identity") or {}
    answer, claim = calibration["answer_level"], calibration["claim_level"]
    folds = calibration["out_of_fold"].get("folds", 5)
    informative = claim["sensitivity"] + claim["specificity"] - 1
    lines = [
        f"**{identity.get('dtype')}** (`{calibration['judge']['name']}.{identity.get('dtype')}`): "
        f"the judge {identity.get('name')} (weights sha256 {str(identity.get('weights_sha256'))[:12]}...) on {calibration['answers']} "
        f"labelled answers ({calibration['hallucinated']} hallucinated) to "
        f'{calibration.get("questions", "?")} questions; domain "{calibration["domain"]}". '
        f"Threshold {calibration['threshold']:g} (chosen on all of them; the judge runs at it "
        f"with `--calibration`). Out-of-fold ({folds} folds by question): answer level "
        f"sensitivity {_share(answer, 'sensitivity')}, specificity "
        f"{_share(answer, 'specificity')}, AUROC {answer['auroc']:.3f}; claim level, on "
        f"{claim['claims']} claims, sensitivity {_share(claim, 'sensitivity')}, specificity "
        f"{_share(claim, 'specificity')}. se + sp - 1 = {informative:.2f}: the correction "
        f"multiplies any error in a judged claim rate by ~{1 / informative:.1f}.",
    ]
    return "\n".join(lines)


def rebuilt(text: str, block: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + block + "\n" + text[end:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Exit 1 if the block is stale.")
    args = parser.parse_args()
    text = DOCS.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOCS}: no calibration-facts markers")
    block = render([json.loads(file.read_text(encoding="utf-8")) for file in SHIPPED])
    wanted = rebuilt(text, block)
    if args.check:
        if wanted != text:
            sys.exit(
                f"{DOCS}: the shipped calibrations' figures differ from their files; run "
                "scripts/calibration_facts.py"
            )
        return
    DOCS.write_text(wanted, encoding="utf-8")


if __name__ == "__main__":
    main()
