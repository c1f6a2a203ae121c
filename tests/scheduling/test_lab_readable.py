"""Run and comparison pages a person can read at a glance: one unit per line, one rounding of
each figure everywhere, no "-0.000", decisions with the numbers they compared."""

import json
import re

import pytest

from boincweb.human import number
from tests.pages import by_testid, parse
from tests.scheduling.test_lab_views import finished_run, stored, user  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

NEGATIVE_ZERO = re.compile(r"-0(?:\.0*)?(?![\d.])")
# a clock or a duration next to raw seconds ("0.20 h … at 720 s")
RAW_SECONDS = re.compile(r"\bat \d+(?:\.\d+)? s\b|\d+\.\d+ h\b")


def log_of(page, run):
    return json.loads(page.find("script", id=f"run-{run.pk}-log").string)["decisions"]


def loaded_log(client, page, run):
    """A comparison's decision log of ``run``, from the charts JSON the page loads after it."""
    sources = [el["data-figures-src"] for el in page.select("[data-figures-src]")]
    found = [client.get(url).json() for url in sources]
    return next(data[f"run-{run.pk}-log"] for data in found if f"run-{run.pk}-log" in data)["decisions"]


def visible_text(page):
    for script in page.find_all("script"):
        script.decompose()
    return page.get_text(" ")


@pytest.mark.parametrize("policy", ["boinc7", "boinc5"])
def test_a_run_page_has_one_unit_per_line_and_no_negative_zero(client, stored, policy):  # noqa: F811
    run = finished_run(stored, policy)
    page = parse(client.get(f"/lab/runs/{run.pk}/"))
    decisions = log_of(page, run)
    assert decisions
    for _t, _kind, _project, _job, text in decisions:
        assert not NEGATIVE_ZERO.search(text), text
        assert not RAW_SECONDS.search(text), text
    finishes = [d[4] for d in decisions if d[1] == "finish" and "finished at" in d[4]]
    assert finishes and all(re.search(r"finished at day \d+, \d\d:\d\d", t) for t in finishes)
    starts = [d[4] for d in decisions if d[1] == "schedule" and "when picked:" in d[4]]
    assert starts, "a start says the value its project was picked with"
    assert page.select_one("p.lead small").get_text().startswith("Duration 6 h 00 min, step 1 min 00 s, seed 1")
    text = visible_text(page)
    assert not NEGATIVE_ZERO.search(text)
    card = by_testid(page, "figures-card")
    shown = {dt.get_text(" ", strip=True).rstrip(" ?"): dd.get_text() for dt, dd in zip(card("dt"), card("dd"))}
    figures = run.summary["figures"] if run.summary else None
    if figures:
        assert shown["Share violation"] == number(figures["share_violation"])
    assert len(page.select("[data-testid=debt-note]")) == (policy == "boinc5")


def test_the_compare_page_rounds_each_figure_once_and_says_no_edf_slices_in_words(client, stored):  # noqa: F811
    a, b = finished_run(stored, "boinc7"), finished_run(stored, "boinc5")
    page = parse(client.get(f"/lab/compare/?runs={a.pk},{b.pk}"))
    table = by_testid(page, "compare-table")
    row = next(tr for tr in table("tr") if tr.td and tr.td.get_text() == "Share violation")
    in_table = [td.find("span").get_text() for td in row("td")[1:]]
    cards = [by_testid(section, "figures-card") for section in page.select('[data-testid="compare-run"]')]
    in_cards = [
        next(dd.get_text() for dt, dd in zip(card("dt"), card("dd")) if dt.get_text().startswith("Share violation"))
        for card in cards
    ]
    assert in_table == in_cards
    text = visible_text(page)
    assert not NEGATIVE_ZERO.search(text)
    assert "ran 0 time slices" not in text
    for run in (a, b):
        for _t, _kind, _project, _job, line in loaded_log(client, page, run):
            assert not RAW_SECONDS.search(line), line
    assert page.find(attrs={"data-figure": f"run-{b.pk}-priority"}) is not None
