"""Open a report in the distribution's headless Chromium (Playwright drives it, no download)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
# without these, Chromium reaches for Google's hosts at start (refused on a closed network)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class PageLog:
    """What the page did while open: console errors, uncaught errors, requests, dialogs."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def open_report(path: Path, width: int = 1280, height: int = 900) -> Iterator[tuple[Any, PageLog]]:
    """(page, log) for a report file; fails loudly when Chromium is missing (make browser)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), (
        "no /usr/bin/chromium: run `make browser` (scripts/install-browser.sh)"
    )
    log = PageLog()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: m.type == "error" and log.console_errors.append(m.text))
            page.on("pageerror", lambda e: log.page_errors.append(str(e)))
            page.on("request", lambda r: log.requests.append(r.url))

            def on_dialog(dialog: Any) -> None:
                log.dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto(path.resolve().as_uri())
            page.wait_for_load_state("load")
            yield page, log
        finally:
            browser.close()
