"""`auditor review`: choose the random sample of a run's answers that people review."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from auditor.files import refuse_given_twice
from auditor.results import load_run
from auditor.review import draw_review, write_review
from auditor.reviewed import labels_advice, reviewed_rate

__all__ = ["review"]


def _share(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A share of the drawn answers: a number above 0 and at most 1 (nan, inf refused)."""
    if value is None:
        return None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise click.BadParameter(f"{value} is not a share above 0 and at most 1 (e.g. 0.2)")
    return value


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--sample",
    "size",
    required=True,
    type=click.IntRange(1),
    help="Answers to review per run (a larger N later extends the sample: the first N stay).",
)
@click.option(
    "--seed",
    type=click.IntRange(0),
    default=None,
    help="Seed of the draw (default: the one review.json records, else 0).",
)
@click.option(
    "--second-review",
    "second_share",
    type=float,
    callback=_share,
    default=None,
    help="Share of the drawn answers a second person reviews blind (e.g. 0.2: round(0.2 x N) "
    "of them, at least 1): the report gives the two reviews' agreement (Cohen's kappa) and an "
    "adjudicator settles where they differ. It may grow later, not shrink.",
)
def review(
    run_dirs: tuple[Path, ...], size: int, seed: int | None, second_share: float | None
) -> None:
    """Pick N checked answers of each RUN_DIR uniformly at random for people to review.

    Writes RUN_DIR/review.json (seed, each answer's inclusion probability); `auditor report`
    then renders a review section for them, whose labels (`--labels`) turn into reviewed
    rates with 95 % intervals. The same seed gives the same sample. Review them in the order
    drawn: only the labelled prefix of that order makes a rate.
    """

    refuse_given_twice("RUN_DIR", run_dirs)  # each run's review.json written once
    runs = [load_run(run_dir) for run_dir in run_dirs]  # every dir validated before writing
    plans = [(run, *draw_review(run, size, seed, second_share)) for run in runs]
    for run, sample, earlier in plans:
        write_review(run.run_dir, sample, earlier)
        grew = f" ({sample.size - size} more: new answers fell among those drawn before)"
        click.echo(
            f"{run.name}: {sample.size} of {len(sample.population)} answers to review (uniform, "
            f"seed {sample.seed}){grew if sample.size > size else ''}"
            + _second_said(sample)
            + f" -> {run.run_dir / 'review.json'}"
        )
        # how many labels a rate needs, before any is made (the widest a rate can be)
        unlabelled = reviewed_rate([], [], [0.0] * len(sample.population))
        click.echo("  " + labels_advice(unlabelled, "labels needed"))
    dirs = " ".join(str(d) for d in run_dirs)
    click.echo(
        f"review them in the report's review section (auditor report {dirs}), download the "
        f"labels, then: auditor report {dirs} --labels labels.jsonl"
    )


def _second_said(sample: Any) -> str:
    """What the share drew for a second review, in words (none said where none was asked)."""
    if sample.second_share <= 0:
        return ""
    second = sample.second_review
    if not second:
        return (
            f", none for a second review (a share of {sample.second_share:g} of no drawn "
            "answer is none)"
        )
    return f", {len(second)} of them for a blind second review (share {sample.second_share:g})"
