"""The report in a real headless Chromium: no console errors, no network, filters, search,
claim details one click away, injected markup inert."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import open_report
from tests.test_audit import GOOD, SLOPPY, _audit, corpus  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e


@pytest.fixture
def report(corpus: tuple[Path, Path], tmp_path: Path) -> Path:  # noqa: F811
    out = tmp_path / "audit"
    _audit(corpus, out, {"good": GOOD, "sloppy": SLOPPY}, ["hallucination_rate<=0.1"])
    return out / "report.html"


def test_report_loads_offline_without_errors_and_scripts_stay_inert(report: Path) -> None:
    with open_report(report) as (page, log):
        assert page.title().startswith("Goodput audit")  # the injected script did not run
        assert page.locator("#comparison-table tbody tr").count() == 2
        assert page.locator("#gate-verdict").inner_text().startswith("Gates failed")
        assert page.locator("svg").count() >= 4
        assert page.locator("section.question").count() == 2
    assert log.console_errors == [] and log.page_errors == [] and log.dialogs == []
    assert log.requests == [report.resolve().as_uri()], "the report fetched something"


def test_claim_details_are_one_click_away(report: Path) -> None:
    with open_report(report) as (page, log):
        link = page.locator("a.claim.v-contradicted").first
        target = link.get_attribute("href")
        assert target and page.locator(target).get_attribute("open") is None
        link.click()
        detail = page.locator(target)
        assert detail.get_attribute("open") is not None
        assert detail.is_visible() and "Contradicted by" in detail.inner_text()
        assert "contradicted" in detail.locator("summary").inner_text()
    assert log.page_errors == []


def test_filters_and_search(report: Path) -> None:
    with open_report(report) as (page, _):
        answers = page.locator("article.answer")
        assert answers.count() == 4
        page.check("#filter-hallucinated")
        visible = [a for a in answers.all() if a.is_visible()]
        assert len(visible) == 1 and "sloppy" in visible[0].locator("h4").inner_text()
        page.uncheck("#filter-hallucinated")
        page.select_option("#filter-pipeline", label="good")
        assert sum(a.is_visible() for a in answers.all()) == 2
        page.select_option("#filter-pipeline", value="")
        page.fill("#filter-text", "return a thermostat")
        assert page.locator("section.question:visible").count() == 1
        assert "2 answers shown" in page.locator("#filter-count").inner_text()


def test_the_script_runs_by_its_hash_and_huge_text_wraps(
    corpus: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The CSP admits only our script (by hash, no 'unsafe-inline'), and a 20,000-character
    question or answer without a space wraps instead of widening the page."""
    import json

    _, questions = corpus
    questions.write_text(
        json.dumps({"id": "q1", "question": "W" * 20_000})
        + "\n"
        + json.dumps({"id": "q2", "question": "Within how many days can I return a thermostat?"})
        + "\n"
    )
    out = tmp_path / "wide"
    _audit(corpus, out, {"good": ["x" * 20_000, GOOD[1]]})
    html = (out / "report.html").read_text()
    assert "'unsafe-inline'; img-src" not in html and "script-src 'sha256-" in html
    with open_report(out / "report.html") as (page, log):
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        assert "2 answers shown" in page.locator("#filter-count").inner_text()  # script ran
    assert log.console_errors == [] and log.page_errors == []
