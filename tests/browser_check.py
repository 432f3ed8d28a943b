"""Render the HTML route report in headless Chromium, as a person would look at it.

Not part of the pytest suite (CI has no browser). For each category it writes
`routectl report --html` into a folder, loads it in headless Chromium with a row selected
(`#r0`), fails on any console message or script error, on an empty grid or on a details
panel the script did not fill, and saves a PNG screenshot of the category's grid. It prints
the folder at the end.

    python tests/browser_check.py [--out DIR] [--chromium PATH] [-c CATEGORY ...]

Needs Debian's `chromium` package (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import html.parser
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120
WIDTH = 1700


class DomSummary(html.parser.HTMLParser):
    """Counts grid cells and collects the details panel's text from the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.cells = 0
        self.details: list[str] = []
        self._in_details = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "td" and "data-row" in found:
            self.cells += 1
        if found.get("id") == "detail-body":
            self._in_details = 1
        elif self._in_details and tag in ("div", "p", "h2", "h3", "pre", "table"):
            self._in_details += 1

    def handle_endtag(self, tag: str) -> None:
        if self._in_details and tag in ("div", "p", "h2", "h3", "pre", "table"):
            self._in_details -= 1

    def handle_data(self, data: str) -> None:
        if self._in_details:
            self.details.append(data)


def chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def categories() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "routectl", "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def check_category(binary: str, name: str, out: Path) -> list[str]:
    page = out / f"{name}.html"
    made = subprocess.run(
        [sys.executable, "-m", "routectl", "report", "--html", str(page), "-c", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        return [f"{name}: routectl report exited {made.returncode}: {made.stderr.strip()}"]
    url = page.resolve().as_uri() + "#r0"
    dom = chromium(binary, "--dump-dom", url)
    problems = [
        f"{name}: console: {line.split('CONSOLE', 1)[1]}"
        for line in dom.stderr.splitlines()
        if ":CONSOLE" in line
    ]
    summary = DomSummary()
    summary.feed(dom.stdout)
    if summary.cells == 0:
        problems.append(f"{name}: the grid is empty")
    details = " ".join(" ".join(summary.details).split())
    if f"{name}:" not in details:
        problems.append(
            f"{name}: the details panel does not show the selected row ({details[:80]!r})"
        )
    rows = dom.stdout.count("<tr>")
    height = min(max(900, 260 + 23 * rows), 6000)
    shot = out / f"{name}.png"
    taken = chromium(
        binary, f"--window-size={WIDTH},{height}", f"--screenshot={shot}", page.resolve().as_uri()
    )
    if not shot.is_file() or shot.stat().st_size == 0:
        problems.append(f"{name}: no screenshot ({taken.stderr.strip()[-200:]})")
    print(f"{name}: {summary.cells} cells, screenshot {shot}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Folder for pages and PNGs.")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("-c", "--category", action="append", default=[])
    args = parser.parse_args()
    if shutil.which(args.chromium) is None and not Path(args.chromium).is_file():
        print(
            f"error: no Chromium at {args.chromium!r} (apt-get install chromium)", file=sys.stderr
        )
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="routectl-browser-"))
    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for name in args.category or categories():
        problems += check_category(args.chromium, name, out)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"screenshots and pages in {out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
