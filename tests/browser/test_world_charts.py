"""A world's page and a plain-against-locality comparison, drawn in Chromium."""

import pytest

from tests.factories import WorldFactory
from world.jobs import run_in_process

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = ("results", "rpcs", "hosts", "credit", "bytes")


@pytest.fixture
def twins():
    """A plain and a locality world on one seed, each run to its end."""
    worlds = []
    for locality in (False, True):
        world = WorldFactory(
            name=f"twin {'locality' if locality else 'plain'}", hosts=12, days=0.5, seed=5, locality=locality
        )
        run_in_process(world)
        worlds.append(world)
    return worlds


def drawn_traces(page, testid):
    chart = page.locator(f"[data-testid={testid}]")
    chart.locator(".main-svg").first.wait_for()
    return chart.locator(".scatterlayer .trace, .barlayer .trace").count()


def test_a_world_page_draws_its_five_charts(page, live_server, twins):
    plain = twins[0]
    page.goto(f"{live_server.url}/project/worlds/{plain.pk}/")
    assert page.locator("h1").inner_text() == "World twin plain"
    assert drawn_traces(page, "chart-results") == 6
    assert drawn_traces(page, "chart-rpcs") == 3
    for name in ("hosts", "credit", "bytes"):
        assert drawn_traces(page, f"chart-{name}") == 1
    assert "Results by server state" in page.locator("[data-testid=chart-results]").inner_text()


def test_the_worlds_list_leads_to_a_plain_against_locality_comparison(page, live_server, twins):
    page.goto(f"{live_server.url}/project/worlds/")
    page.click("text=compare with locality")
    page.wait_for_url("**/project/worlds/compare/?worlds=*")
    saved = page.locator("[data-testid=transfer-saved]").inner_text()
    assert "less input transfer" in saved, saved
    assert "only the scheduling differs" in page.inner_text(".lead")
    for name in ("bytes", "success", "credit", "rpcs"):
        assert drawn_traces(page, f"chart-{name}") == 2  # one line per world
    assert drawn_traces(page, "chart-results-1") == 6
    assert drawn_traces(page, "chart-results-2") == 6
