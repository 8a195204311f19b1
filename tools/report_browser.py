"""Open an amqpcap report in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) with
every network request refused, and say what a reader would see: console errors, requests the page
tried, each plot's rendered traces, and a screenshot.

    python -m tools.report_browser report.html --screenshot docs/report.png

Playwright's own browser download does not work here: it only drives the Chromium installed by apt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = ["--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

# Per plot div: Plotly's own record of what it drew (gd._fullData) and what is in the SVG.
PLOTS_JS = """
() => Array.from(document.querySelectorAll('div.js-plotly-plot')).map(gd => ({
    id: gd.id,
    section: gd.closest('section') ? gd.closest('section').id : null,
    traces: (gd._fullData || []).length,
    points: (gd._fullData || []).reduce((n, t) => n + ((t.x && t.x.length) || 0), 0),
    svg: gd.querySelectorAll('svg.main-svg').length,
    drawn: gd.querySelectorAll('.cartesianlayer .trace, .barlayer .trace').length,
    marks: gd.querySelectorAll('.cartesianlayer path.point, .cartesianlayer path.js-line, .scatterlayer path.js-fill').length,
    width: gd.getBoundingClientRect().width, height: gd.getBoundingClientRect().height,
    // drawn wider than the room it has (then clipped): Plotly sized it before its row was laid out
    overflow: Math.max(0, ...Array.from(gd.querySelectorAll('svg.main-svg')).map(
        s => s.getBoundingClientRect().width - gd.parentElement.getBoundingClientRect().width)),
}))
"""


@dataclass
class PageView:
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # anything but the page itself (all refused)
    plots: list[dict] = field(default_factory=list)
    sections: list[dict] = field(default_factory=list)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def view(page_path: str | Path, screenshot: str | Path | None = None, width: int = 1280, height: int = 2000,
         full_page: bool = False) -> PageView:
    from playwright.sync_api import sync_playwright
    url = Path(page_path).resolve().as_uri()
    seen = PageView()
    with tempfile.TemporaryDirectory(prefix="amqpcap-chromium-") as profile, sync_playwright() as pw:
        # A fresh profile each time; Playwright adds --headless and --no-sandbox (chromium_sandbox=False).
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=chromium(), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height}, offline=True)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", lambda m: m.type == "error" and seen.console_errors.append(m.text))
            page.on("pageerror", lambda e: seen.page_errors.append(str(e)))

            def refuse(route):
                if route.request.url != url:
                    seen.requests.append(route.request.url)
                    return route.abort()
                return route.continue_()
            page.route("**/*", refuse)
            page.goto(url, wait_until="load")
            # Plotly draws each figure as its script runs; wait until every div has its SVG.
            page.wait_for_function("() => Array.from(document.querySelectorAll('div.plotly-graph-div'))"
                                   ".every(d => d.querySelector('svg.main-svg'))", timeout=30_000)
            seen.plots = page.evaluate(PLOTS_JS)
            seen.sections = page.evaluate("() => Array.from(document.querySelectorAll('section')).map(s => "
                                          "({id: s.id, empty: s.dataset.empty === 'true', "
                                          "plots: s.querySelectorAll('div.plotly-graph-div').length, "
                                          "text: s.innerText.slice(0, 400)}))")
            if screenshot:
                page.screenshot(path=str(screenshot), full_page=full_page)
        finally:
            context.close()
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page")
    parser.add_argument("--screenshot", help="PNG of the top of the page")
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    if not chromium():
        print("no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    seen = view(args.page, args.screenshot, height=args.height)
    print(json.dumps(seen.__dict__, indent=1, default=str))
    bad = seen.console_errors or seen.page_errors or seen.requests
    if args.screenshot:
        print(f"{args.screenshot}: {os.path.getsize(args.screenshot) / 1e3:.0f} KB", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
