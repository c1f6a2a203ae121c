"""Four people walk their paths through the pages in Chromium after real activity (two worlds
run, the daemons passed, lab runs done): a teacher in the lab, a project admin, a volunteer and
a researcher. On every page they open, no time shows as raw Unix seconds and every chart's tick
labels lie inside the chart's box; each walk ends on what that person came for."""

import re
import urllib.request
from xml.etree import ElementTree

import django_rq
import pytest

from backend.models import Host, Outcome, Result
from tests.browser.test_lab_flows import lanes_with_bars, run_decisions
from tests.pages import raw_epochs
from tests.protocol.requests import work_request
from tests.web.busy_site import STAFF, build_busy_site

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVERY_CHART_DRAWN = """() => [...document.querySelectorAll("[data-figure]")].every(
  (div) => div.querySelector(".main-svg"))"""

# Tick labels and axis titles outside the box of the chart they belong to (a clipped label).
CLIPPED = """() => {
  const out = [];
  for (const plot of document.querySelectorAll(".js-plotly-plot")) {
    const svg = plot.querySelector("svg.main-svg");
    if (!svg) continue;
    const box = svg.getBoundingClientRect();
    const labels = plot.querySelectorAll(".xtick text, .ytick text, .g-xtitle text, .g-ytitle text");
    for (const label of labels) {
      const r = label.getBoundingClientRect();
      if (!r.width || !label.textContent.trim()) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        out.push(`${plot.dataset.figure || plot.id}: "${label.textContent}"`);
      }
    }
  }
  return out;
}"""


def look(page, path, url):
    """Open ``path``, draw every chart (scrolled to the end), and check the page as a reader
    sees it: no raw epoch in its text, no tick label outside its chart."""
    page.goto(f"{url}{path}")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function(EVERY_CHART_DRAWN)
    text = page.locator("body").inner_text()
    epochs = raw_epochs(text)
    assert not epochs, f"{path}: raw Unix seconds in {epochs[:3]}"
    clipped = page.evaluate(CLIPPED)
    assert not clipped, f"{path}: tick labels outside the chart: {clipped[:5]}"
    return text


def scheduler_rpc(url, key, hostid=0):
    request = urllib.request.Request(
        f"{url}/boinc/cgi",
        data=work_request(key, hostid),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return ElementTree.fromstring(response.read())


@pytest.fixture
def site(settings, tmp_path, redis_client):
    return build_busy_site(settings, tmp_path)


def test_four_people_walk_their_paths_after_real_activity(browser, live_server, site):
    url = live_server.url
    world, project = site.world, site.world.project

    # The teacher: the seed 002 preset (CPU and GPU projects) compared under boinc5 and boinc7;
    # each start in the decision log quotes the values compared, and boinc5 runs GPU jobs.
    teacher = browser.new_context(viewport={"width": 1440, "height": 900})
    page = teacher.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", STAFF[0])
    page.fill("input[name=password]", STAFF[1])
    page.click("form [type=submit]")
    page.wait_for_url(lambda u: "/accounts/login/" not in u)
    look(page, "/lab/", url)
    page.click("[data-testid=load-seed-002-cpu-and-gpu]")
    page.wait_for_url(re.compile(r"/lab/\d+/$"))
    page.check("input[name=policies][value=boinc5]")
    page.check("input[name=policies][value=boinc7]")
    page.fill("[data-testid=compare-form] input[name=duration]", "1d")
    page.click("[data-testid=compare-policies]")
    page.wait_for_url(re.compile(r"/lab/compare/\?runs=\d+,\d+$"))
    django_rq.get_worker("engine").work(burst=True)
    page.wait_for_selector("[data-testid=compare-table]")
    compare = page.url.removeprefix(url)
    runs = compare.split("runs=")[1].split(",")
    look(page, compare, url)
    headings = page.locator("[data-testid=compare-run] h2").all_inner_texts()
    boinc5 = [h.split()[1] for h in headings].index("boinc5")
    for index in range(2):
        starts = [
            d[4]
            for d in run_decisions(page, index)
            if d[1] in ("START", "RESUME") or d[4].startswith(("Started", "Resumed"))
        ]
        assert starts, headings[index]
        compared = [s for s in starts if "when picked:" in s]
        assert compared, f"{headings[index]}: no start quotes the values compared: {starts[:3]}"
        # the values compared are numbers (a priority, or a debt as a duration)
        assert all(re.search(r"when picked: -?[\d.,]+", s) for s in compared), compared[:3]
    for run in runs:
        look(page, f"/lab/runs/{run}/", url)
    look(page, f"/lab/runs/{runs[boinc5]}/", url)
    labels = page.evaluate("() => document.querySelector('[data-testid=gantt]').layout.yaxis.ticktext")
    busy = [labels[lane] for lane in lanes_with_bars(page)]
    assert any("NVIDIA" in label or "GPU" in label for label in busy), f"boinc5 ran no GPU job on seed 002: {busy}"

    # The project admin: the status page, the workunits, a workunit, then the results filtered
    # by outcome and by host, and the failure summaries.
    base = f"/projects/{project.slug}"
    look(page, f"{base}/status/", url)
    look(page, f"{base}/workunits/", url)
    result = Result.objects.filter(project=project, outcome=Outcome.SUCCESS, host__isnull=False).first()
    look(page, f"{base}/workunits/{result.workunit_id}/", url)
    look(page, f"{base}/results/", url)
    page.select_option("select[name=outcome]", str(Outcome.SUCCESS))
    page.fill("input[name=host]", str(result.host_id))
    page.click("form.filters [type=submit]")
    page.wait_for_url(re.compile(r"host=\d+"))
    page.wait_for_load_state("networkidle")
    # Each row's result name, read once the last filter's table has been swapped in.
    names = page.locator("[data-testid=results] tr td:first-child a").all_text_contents()
    expected = Result.objects.filter(project=project, outcome=Outcome.SUCCESS, host_id=result.host_id)
    assert len(names) == min(expected.count(), 50) > 0
    assert {name.strip() for name in names} <= set(expected.values_list("name", flat=True))
    look(page, page.url.removeprefix(url), url)
    look(page, f"{base}/failures/", url)
    look(page, f"{base}/failures/hosts/", url)
    look(page, "/project/status/", url)
    teacher.close()

    # The volunteer: signs up, joins the demo, attaches a host, saves a bigger buffer, and the
    # host's next scheduler request is answered with it.
    volunteer = browser.new_context(viewport={"width": 1440, "height": 900})
    page = volunteer.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}/")
    page.click("[data-testid=account-links] >> text=Sign up")
    page.fill("input[name=username]", "walker")
    page.fill("input[name=email]", "walker@example.org")
    page.fill("input[name=password1]", "amber-lantern-71")
    page.fill("input[name=password2]", "amber-lantern-71")
    page.click("#signup-form [type=submit]")
    page.wait_for_url(f"{url}/accounts/me/")
    page.click("[data-testid=join-demo]")
    key = page.locator("[data-testid=authenticator]").inner_text().strip()
    hostid = int(scheduler_rpc(url, key).findtext("hostid"))
    look(page, "/accounts/me/", url)
    page.click("[data-testid=host-prefs-link]")
    page.get_by_label("Store at least (days of work)").fill("2")
    page.click("#prefs-form [type=submit]")
    assert "Store at least (days of work): 2" in page.locator(".messages").inner_text()
    look(page, page.url.removeprefix(url), url)
    prefs = scheduler_rpc(url, key, hostid).find("global_preferences")
    assert prefs is not None and prefs.findtext("work_buf_min_days") == "2"
    assert Host.objects.get(pk=hostid).work_buf_min_days == 2
    volunteer.close()

    # The researcher: the worlds, one world, and the plain-against-locality comparison.
    researcher = browser.new_context(viewport={"width": 1440, "height": 900})
    page = researcher.new_page()
    page.set_default_timeout(30_000)
    look(page, "/project/worlds/", url)
    text = look(page, f"/project/worlds/{world.pk}/", url)
    assert "GiB" not in text and "MiB" not in text
    text = look(page, f"/project/worlds/compare/?worlds={world.pk - 1},{world.pk}", url)
    assert "GiB" not in text and "MiB" not in text
    researcher.close()
