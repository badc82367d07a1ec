"""Screenshot a report in headless Chromium (the README's picture): PNG of the first screen.

.venv/bin/python scripts/screenshot_report.py reports/demo/report.html docs/report.png
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.browser import open_report


def main() -> None:
    report, png = Path(sys.argv[1]), Path(sys.argv[2])
    with open_report(report, width=1280, height=1500) as (page, log):
        page.screenshot(path=str(png))
    if log.console_errors or log.page_errors:
        raise SystemExit(f"{report}: errors in the page: {log.console_errors + log.page_errors}")
    print(f"{png}: {png.stat().st_size} bytes")


if __name__ == "__main__":
    main()
