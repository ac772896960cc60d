"""The summary page of a study, laid out by headless Chromium at a laptop's and a phone's width, and the
checks every study shape's page must pass (issue 33): an Answer section with numbers in the first screen,
no sentence that is false for any study, nothing cut off, every image loaded and linked to its full size.
Used by test_report.py on synthetic tables and by the workflow tests on the pages their real runs wrote."""
from __future__ import annotations

import re
from pathlib import Path

from chromium import Chromium

LAPTOP, PHONE, HEIGHT = 1366, 390, 1600
SCREENS = {LAPTOP: 768, PHONE: 844}  # the first screen's height at each width

# The page as laid out: the viewport's width, the page's (wider when something runs off it), the right
# edge of every table's box (its scrolling box when it has one) and of every image's figure, with the
# image's natural width (0 when it did not load); whether each image links to itself, the scale it is
# drawn at; the answer section's top and text; the page's whole text.
LAYOUT = """({viewport: window.innerWidth, page: document.documentElement.scrollWidth,
  tables: [...document.querySelectorAll('table')].map(t => Math.ceil((t.closest('.scroll') || t)
          .getBoundingClientRect().right)),
  images: [...document.images].map(i => [i.getAttribute('src'), i.naturalWidth,
                                         Math.ceil((i.closest('figure') || i).getBoundingClientRect().right)]),
  linked: [...document.images].map(i => i.closest('a')
                                         && i.closest('a').getAttribute('href') === i.getAttribute('src')),
  scale: [...document.images].map(i => i.getBoundingClientRect().width / (i.naturalWidth || 1)),
  answer: (a => a ? {top: a.getBoundingClientRect().top, text: a.innerText} : null)(
    document.getElementById('answer')),
  text: document.body.innerText})"""

# Sentences no study's page may say: an answer that is no answer, a figure the code could not compute.
FALSE = [re.compile(p) for p in (
    r"No axis with two values", r"\bNaN\b", r"\bInf\b", r"\bNA (IOPS|ms|tps|transactions/s|s)\b",
    r"= NA\b", r"NA \[", r"\[NA", r"no verdict")]


def page_layout(page: Path, width: int, screenshot: Path | None = None, browser: Chromium | None = None) -> dict:
    """The page as headless Chromium lays it out at `width` px (in a new tab of `browser`, else of a Chromium
    of its own); a screenshot of its first screen."""
    if browser is None:
        with Chromium() as own:
            return page_layout(page, width, screenshot, own)
    browser.open(page.as_uri(), width, HEIGHT)
    if screenshot:
        browser.screenshot(screenshot)
    return browser.evaluate(LAYOUT)


def false_sentences(text: str) -> list[str]:
    """The lines of `text` that say something no page may say (FALSE)."""
    return [line for line in text.splitlines() if any(p.search(line) for p in FALSE)]


def check_page(page: Path, answer: str, shape: str, images: bool = True,
               browser: Chromium | None = None) -> dict[int, dict]:
    """Assert what every shape's page must show at 1366 and 390 px: `answer` (a regular expression, with
    numbers) found in an Answer section that starts in the first screen; no false sentence anywhere on the
    page; nothing wider than the viewport (page, tables, figures); every image loaded, linked to itself
    (its full size), and on a phone drawn at 80% of its size or more. Returns the layouts by width. One
    Chromium (`browser`, else its own) lays out both widths."""
    if browser is None:
        with Chromium() as own:
            return check_page(page, answer, shape, images, own)
    layouts = {}
    for width in (LAPTOP, PHONE):
        layout = page_layout(page, width, browser=browser)
        where = f"{shape} at {width} px"
        assert layout["answer"], f"{where}: no Answer section"
        # its heading and first line (with numbers) within the first screen
        assert layout["answer"]["top"] < SCREENS[width] * 0.75, (where, layout["answer"]["top"])
        said = " ".join(layout["answer"]["text"].split())
        assert re.search(answer, said), (where, said)
        assert false_sentences(layout["text"]) == [], (where, false_sentences(layout["text"]))
        assert layout["viewport"] == width and layout["page"] <= width, (where, layout["page"])
        assert max(layout["tables"], default=0) <= width, (where, layout["tables"])
        if images:
            assert layout["images"], f"{where}: no image"
        assert all(natural > 100 and right <= width for _, natural, right in layout["images"]), (
            where, layout["images"])
        assert all(layout["linked"]), (where, layout["images"], layout["linked"])
        if width == PHONE and layout["scale"]:
            assert min(layout["scale"]) >= 0.8, (where, layout["scale"])
        layouts[width] = layout
    return layouts
