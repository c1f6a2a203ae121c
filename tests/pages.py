"""The project's pages read as HTML trees, and the pieces of them tests look at."""

import json

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
