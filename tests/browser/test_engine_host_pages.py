"""From a world to an engine host's Gantt chart, to a workunit it computed, and back
(issue 20, both sides on one screen), in Chromium."""

import re

import pytest

from tests.factories import WorldFactory
from world.jobs import run_in_process

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def engine_world():
    world = WorldFactory(
        name="mixed", hosts=3, days=0.5, seed=4, settings={"engine_hosts": [{"count": 2, "policy": "boinc7"}]}
    )
    run_in_process(world)
    return world


def test_a_world_leads_to_an_engine_hosts_gantt_to_a_workunit_and_back(page, live_server, engine_world):
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/project/worlds/{engine_world.pk}/")
    page.locator("[data-testid=engine-host-link]").first.click()
    page.wait_for_url(re.compile(r".*/project/worlds/\d+/engine/\d+/$"))
    host_page = page.url
    gantt = page.locator("[data-testid=gantt]")
    gantt.locator(".main-svg").first.wait_for()
    assert "Who ran where" in gantt.inner_text()
    for name in ("rec", "buffer"):
        page.locator(f"[data-testid={name}] .main-svg").first.wait_for()

    # a bar of the world's project, clicked where Plotly drew it, opens the result it computed
    point = page.evaluate(
        """() => {
        const div = document.querySelector("[data-testid=gantt]");
        const trace = div.data.find((t) => t.customdata && t.customdata.some((u) => u));
        const i = trace.customdata.findIndex((u) => u);
        const xa = div._fullLayout.xaxis, ya = div._fullLayout.yaxis;
        const box = div.getBoundingClientRect();
        return {x: box.left + xa._offset + xa.l2p(trace.x[i]), y: box.top + ya._offset + ya.l2p(trace.y[i]),
                url: trace.customdata[i]};
    }"""
    )
    page.mouse.move(point["x"], point["y"])
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url(f"{live_server.url}{point['url']}")
    assert page.locator("h1").inner_text().startswith("Result ")
    page.go_back()
    page.wait_for_url(host_page)

    # the slices table names each slice's workunit, on its world's project's pages; that page
    # links back to this host's slices
    page.locator("[data-testid=slices] [data-testid=workunit-link]").first.click()
    page.wait_for_url(re.compile(rf".*/projects/world-{engine_world.pk}/workunits/\d+/$"))
    assert page.locator("h1").inner_text().startswith("Workunit ")
    page.locator("[data-testid=result-link]").first.click()
    page.wait_for_url(re.compile(r".*/project/worlds/\d+/engine/\d+/\?job=.*"))
    assert page.locator("[data-testid=chosen-slice]").count() >= 1
    page.locator("[data-testid=world-link]").click()
    page.wait_for_url(f"{live_server.url}/project/worlds/{engine_world.pk}/")
    assert not errors, errors
