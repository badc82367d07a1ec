"""`auditor review`: choose the random sample of a run's answers that people review."""

from __future__ import annotations

from pathlib import Path

import click

from auditor.errors import BadInput
from auditor.results import load_run
from auditor.review import choose_sample, read_review, run_fingerprint, write_review

__all__ = ["review"]


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
    type=int,
    default=None,
    help="Seed of the draw (default: the one review.json records, else 0).",
)
def review(run_dirs: tuple[Path, ...], size: int, seed: int | None) -> None:
    """Pick N checked answers of each RUN_DIR uniformly at random for people to review.

    Writes RUN_DIR/review.json (seed, each answer's inclusion probability); `auditor report`
    then renders a review section for them, whose labels (`--labels`) turn into reviewed
    rates with 95 % intervals. The same seed gives the same sample.
    """

    runs = [load_run(run_dir) for run_dir in run_dirs]  # every dir validated before writing
    plans = []
    for run in runs:
        if not run.checks:
            raise BadInput(
                f"{run.run_dir}: no checked answers; check it first (auditor check {run.run_dir})"
            )
        earlier = read_review(run.run_dir)
        chosen_seed = seed if seed is not None else int((earlier or {}).get("seed", 0))
        if earlier is not None and seed is not None and seed != earlier.get("seed"):
            raise BadInput(
                f"{run.run_dir / 'review.json'}: drawn with seed {earlier.get('seed')}; another "
                "seed would replace the sample people may have reviewed: remove the file first"
            )
        ids = [str(row["id"]) for row in run.checks if not row.get("error")]
        sample = choose_sample(ids, size, chosen_seed, run_fingerprint(run.manifest))
        plans.append((run, sample, earlier))
    for run, sample, earlier in plans:
        write_review(run.run_dir, sample, earlier)
        click.echo(
            f"{run.name}: {sample.size} of {len(sample.population)} answers to review (uniform, "
            f"seed {sample.seed}) -> {run.run_dir / 'review.json'}"
        )
    dirs = " ".join(str(d) for d in run_dirs)
    click.echo(
        f"review them in the report's review section (auditor report {dirs}), download the "
        f"labels, then: auditor report {dirs} --labels labels.jsonl"
    )
