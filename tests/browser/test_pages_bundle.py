"""The pages' charts drawn in Chromium by our partial Plotly bundle (static/vendor/plotly): every
chart of the lab comparison and run, a project's status and workunit pages, a world and a world
comparison draws each of its traces with a trace module the bundle holds, without a word on the
console, and without the reader scrolling to it."""

import pytest
from plotly.offline import get_plotlyjs_version

from backend.models import Workunit
from tests.browser.test_console import GL_DRIVER
from tests.web.busy_site import build_busy_site

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUNDLE = "/static/vendor/plotly/plotly.min.js"

# Each chart's figure as Plotly took it: the trace types asked for, and those it drew with a
# module of the bundle (an unknown type has none and is left out).
CHARTS = """() => [...document.querySelectorAll("[data-figure]")].map((div) => ({
  id: div.dataset.figure,
  drawn: !!div.querySelector(".main-svg"),
  asked: (div.data || []).map((t) => t.type || "scatter"),
  known: (div._fullData || []).filter((t) => t._module).map((t) => t.type),
}))"""
EVERY_CHART_DRAWN = """() => [...document.querySelectorAll("[data-figure]")].every(
  (div) => div.querySelector(".main-svg"))"""


@pytest.fixture
def busy_site(settings, tmp_path, redis_client):
    return build_busy_site(settings, tmp_path)


def chart_pages(site):
    world = site.world
    project = world.project
    wu = Workunit.objects.filter(project=project, results__isnull=False).order_by("id").first()
    return {
        "lab compare": f"/lab/compare/?runs={','.join(str(r.pk) for r in site.runs)}",
        "lab run": f"/lab/runs/{site.runs[0].pk}/",
        "status": f"/projects/{project.slug}/status/",
        "workunit": f"/projects/{project.slug}/workunits/{wu.pk}/",
        "world": f"/project/worlds/{world.pk}/",
        "world compare": f"/project/worlds/compare/?worlds={world.pk - 1},{world.pk}",
    }


def test_every_chart_of_the_chart_pages_draws_with_the_partial_bundle(browser, live_server, busy_site):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = []
    page.on(
        "console",
        lambda msg: (
            msg.type in ("error", "warning")
            and not msg.text.startswith(GL_DRIVER)
            and problems.append(f"console {msg.type}: {msg.text}")
        ),
    )
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    scripts = []
    page.on("request", lambda r: r.resource_type == "script" and scripts.append(r.url))
    try:
        for name, path in chart_pages(busy_site).items():
            page.goto(f"{live_server.url}{path}")
            # drawn where they are, with no scrolling: those off screen while the page is idle
            page.wait_for_function(EVERY_CHART_DRAWN)
            charts = page.evaluate(CHARTS)
            assert charts, f"{name}: no chart"
            for chart in charts:
                assert chart["drawn"] and chart["asked"], f"{name}: {chart}"
                assert chart["known"] == chart["asked"], f"{name}: trace types without a module: {chart}"
            assert page.evaluate("Plotly.version") == get_plotlyjs_version(), name
            assert not problems, f"{name}: " + "\n".join(problems)
        plotly = {url for url in scripts if "plotly" in url}
        assert plotly == {f"{live_server.url}{BUNDLE}"}, plotly
    finally:
        context.close()


def test_the_partial_bundle_is_served_from_our_static_files(page, live_server):
    answer = page.request.get(f"{live_server.url}{BUNDLE}")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith(("application/javascript", "text/javascript"))
    body = answer.body()
    assert f"plotly.js (boincweb - minified) v{get_plotlyjs_version()}".encode() in body[:300]
    # a third of the plotly package's full bundle (4.8 MB)
    assert len(body) < 2_000_000
