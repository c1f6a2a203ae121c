"""A sample of the site's pages, after a simulated day, logs nothing to Chromium's console: no
script error, no failed request, through a round of htmx polling."""

import pytest

from tests.web.busy_site import STAFF, build_busy_site

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Long enough for every "every 2s" panel to poll once.
POLL_WAIT_MS = 2500
# Pages open at once: each loads in turn, then all of them poll through one wait.
TABS = 6
# Chromium's software GL reports its own slowness when Plotly reads pixels back; that is the
# machine speaking, not the page.
GL_DRIVER = "[.WebGL-"
ANONYMOUS_PATHS = ["/", "/project/status/", "/project/worlds/", "/lab/"]


@pytest.fixture
def busy_site(settings, tmp_path, redis_client):
    return build_busy_site(settings, tmp_path)


def watch(page, url):
    """Load ``url`` in ``page``; returns the list the console and the network report to, from
    before the load until the page is closed."""
    problems = []
    page.on(
        "console",
        lambda msg: (
            msg.type in ("error", "warning")
            and not msg.text.startswith(GL_DRIVER)
            and problems.append(f"console {msg.type}: {msg.text} ({msg.location.get('url')})")
        ),
    )
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.on("requestfailed", lambda r: problems.append(f"failed {r.url}: {r.failure}"))
    page.goto(url, wait_until="load")
    return problems


def test_a_sample_of_pages_keeps_the_console_clean(browser, live_server, busy_site):
    staff = browser.new_context(viewport={"width": 1400, "height": 1000})
    anonymous = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        login = staff.new_page()
        login.goto(f"{live_server.url}/accounts/login/")
        login.fill("input[name=username]", STAFF[0])
        login.fill("input[name=password]", STAFF[1])
        login.click("form [type=submit]")
        login.wait_for_url(lambda url: "/accounts/login/" not in url)
        login.close()
        visits = [(staff, path) for path in busy_site.sample_paths()]
        visits += [(anonymous, path) for path in ANONYMOUS_PATHS]
        report = []
        for first in range(0, len(visits), TABS):
            tabs = [(context, path, context.new_page()) for context, path in visits[first : first + TABS]]
            watched = [watch(page, f"{live_server.url}{path}") for _, path, page in tabs]
            tabs[-1][2].wait_for_timeout(POLL_WAIT_MS)  # every tab in the batch polls at least once
            for (context, path, page), problems in zip(tabs, watched, strict=True):
                page.close()
                who = "staff" if context is staff else "anonymous"
                report += [f"{who} {path}: {line}" for line in problems]
        # The icon every page names, and the one browsers ask for when a page names none.
        for path in ["/favicon.ico", busy_site.icon_url()]:
            answer = anonymous.request.get(f"{live_server.url}{path}")
            report += [f"{path}: {answer.status}"] if not answer.ok else []
        print(f"\nchecked the console on {len(visits)} page visits")
        assert not report, "\n".join(report)
    finally:
        staff.close()
        anonymous.close()
