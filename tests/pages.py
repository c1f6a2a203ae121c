"""The project's pages read as HTML trees, and the pieces of them tests look at."""

import json
import re

from bs4 import BeautifulSoup


def parse(page):
    """A page (a test client's response, or its text) as a BeautifulSoup tree."""
    if hasattr(page, "content"):
        page = page.content.decode()
    return BeautifulSoup(page, "html.parser")


def texts(tags):
    return [tag.get_text(strip=True) for tag in tags]


def rows(table):
    """The text of each row's cells; the header row (of <th>) is left out."""
    return [texts(tr.find_all("td")) for tr in table.find_all("tr") if tr.find("td")]


def by_testid(tree, testid):
    """The element of ``data-testid="<testid>"``; fails when the page has none or several."""
    [element] = tree.select(f'[data-testid="{testid}"]')
    return element


def count(tree, name):
    """The text of the page's ``data-count="<name>"`` figure."""
    return tree.find(attrs={"data-count": name}).get_text(strip=True)


def figures(tree):
    """The data of the page's charts: their ``<script type="application/json">`` blocks."""
    return [json.loads(script.string) for script in tree.select('script[id][type="application/json"]')]


# A 9–10 digit number standing alone where a time is meant: Unix seconds from 2001 to 2286.
# Thousands separators and decimals make a figure, and a number inside a name (BOINC's locality
# workunits carry their generator's time, "…_einstein_1800082799_9") is part of the name.
RAW_EPOCH = re.compile(r"(?<![\w,.])[1-9]\d{8,9}(?![\w,.])")


def raw_epochs(text):
    """Each raw Unix time in a page's visible ``text``, with the words around it."""
    return [text[max(0, m.start() - 40) : m.end() + 20] for m in RAW_EPOCH.finditer(text)]
