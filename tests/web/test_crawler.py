"""Every page of the site answers after real activity: a crawl from ``/``, as an anonymous
visitor and as staff, over every internal link and every htmx ``hx-get`` URL it finds."""

from collections import Counter, deque
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

import pytest
from django.test import Client
from django.urls import Resolver404, URLResolver, get_resolver, resolve

from tests.pages import raw_epochs
from tests.web.busy_site import build_busy_site

pytestmark = pytest.mark.django_db(transaction=True)

# URLs fetched per URL pattern (route and query keys) and in all, so the crawl stays bounded.
# Django's admin and django-rq are other people's pages, crawled for our models, templates and
# settings: there a route is one pattern whatever its query (the admin's sort and filter links
# multiply without end), fetched once.
PER_PATTERN = 3
PER_OUTSIDE_PATTERN = 1
OUTSIDE = ("admin/", "django-rq/")
MAX_URLS = 1500
# base.html's title, which every page replaces with its own but the home page and the master
# page, whose title is the project's name.
DEFAULT_TITLE = "boincweb"
NAMED_BY_THE_PROJECT = ("/", "/boinc/")
# Nothing under these is crawled: logging out ends the staff crawl, and django-rq's and the
# admin's static assets are not pages.
SKIP = ("/accounts/logout/", "/admin/logout/", "/static/")


# The routes no link leads to, and why.
NOT_CRAWLED = {
    "favicon.ico": "the icon, for browsers",
    "lab/presets/<slug:slug>/": "POST only",
    "lab/<int:pk>/duplicate/": "POST only",
    "lab/<int:pk>/delete/": "POST only",
    "lab/<int:pk>/runs/": "POST only",
    "lab/<int:pk>/compare/": "POST only",
    "project/worlds/new/": "POST only",
    "project/worlds/compare/new/": "POST only",
    "project/worlds/<int:pk>/<slug:action>/": "POST only",
    "project/worlds/<int:pk>/delete/": "POST only",
    "boinc/cgi": "the scheduler, for BOINC clients",
    "boinc/file_upload_handler": "uploads, for BOINC clients",
    "boinc/download/<str:name>": "input files, for BOINC clients",
    "projects/<slug:slug>/boinc/cgi": "a project's scheduler, for BOINC clients",
    "projects/<slug:slug>/boinc/file_upload_handler": "a project's uploads, for BOINC clients",
    "projects/<slug:slug>/boinc/download/<str:name>": "a project's input files, for BOINC clients",
    "accounts/logout/": "POST only",
    "accounts/password_change/": "Django's own, unlinked (the admin has its own)",
    "accounts/password_change/done/": "Django's own, unlinked",
    "accounts/password_reset/": "Django's own, unlinked: the project sends no mail",
    "accounts/password_reset/done/": "Django's own, unlinked",
    "accounts/reset/<uidb64>/<token>/": "Django's own, unlinked",
    "accounts/reset/done/": "Django's own, unlinked",
}


def site_routes(patterns=None, prefix=""):
    """Every route of the URLconf but the admin's and django-rq's."""
    if patterns is None:
        patterns = get_resolver().url_patterns
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if route.startswith(OUTSIDE):
            continue
        if isinstance(entry, URLResolver):
            yield from site_routes(entry.url_patterns, route)
        else:
            yield route


class Links(HTMLParser):
    """The ``href``s of ``<a>`` elements, the ``hx-get`` and ``data-figures-src`` URLs, the ``<title>`` and the text a
    reader sees (outside scripts and styles; attributes such as a time's tooltip are not text)."""

    def __init__(self):
        super().__init__()
        self.links, self.htmx, self.title, self._in_title = [], [], "", False
        self.text, self._hidden = [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if attrs.get("hx-get"):
            self.htmx.append(attrs["hx-get"])
        if attrs.get("data-figures-src"):  # the charts a page loads after it (static/js/charts.js)
            self.links.append(attrs["data-figures-src"])
        self._in_title = tag == "title"
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag in ("script", "style") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._hidden:
            self.text.append(data)


def pattern(url):
    """A URL's pattern: its route (ids and names left out) and the names of its query keys."""
    parts = urlsplit(url)
    try:
        route = resolve(parts.path).route
    except Resolver404:
        route = parts.path
    if route.startswith(OUTSIDE):
        return route, ()
    return route, tuple(sorted({key for key, _ in parse_qsl(parts.query, keep_blank_values=True)}))


def internal(base, href):
    """``href`` made absolute against ``base``, or None when it leaves the site."""
    if href.startswith(("mailto:", "javascript:", "#", "data:")):
        return None
    url, _ = urldefrag(urljoin(base, href))
    parts = urlsplit(url)
    if parts.scheme not in ("", "http") or parts.netloc not in ("", "testserver"):
        return None
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return None if path.startswith(SKIP) else path


def crawl(client, starts=("/",), bucket=pattern, per_pattern=PER_PATTERN, on_page=None):
    """Breadth-first from ``starts``; returns {url: (status, htmx?)} and the list of failures.

    At most ``per_pattern`` URLs are fetched per ``bucket(url)`` (by default its pattern), and
    ``on_page(url, htmx, response, body)`` sees every page that is not a redirect or a 5xx."""
    queue = deque((start, False) for start in starts)
    seen_urls = set()
    per_bucket = Counter()
    visited, failures = {}, []
    while queue:
        url, htmx = queue.popleft()
        key = (url, htmx)
        if key in seen_urls:
            continue
        seen_urls.add(key)
        counted = (bucket(url), htmx)
        if per_bucket[counted] >= (PER_OUTSIDE_PATTERN if pattern(url)[0].startswith(OUTSIDE) else per_pattern):
            continue
        per_bucket[counted] += 1
        if len(visited) >= MAX_URLS:
            common = Counter(pattern(u) for u, _ in visited).most_common(15)
            pytest.fail(f"the crawl passed {MAX_URLS} URLs; most common: {common}")
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.get(url, **headers)
        visited[key] = response.status_code
        if response.status_code >= 500:
            failures.append(f"{url}{' (htmx)' if htmx else ''}: {response.status_code}")
            continue
        if response.status_code in (301, 302, 303, 307, 308):
            target = internal(url, response["Location"])
            if target:
                queue.append((target, False))
            continue
        body = b"".join(response.streaming_content) if response.streaming else response.content
        if on_page is not None:
            on_page(url, htmx, response, body)
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        html = body.decode()
        parser = Links()
        parser.feed(html)
        title = parser.title.strip()
        if (
            not htmx
            and response.status_code == 200
            and (not title or (title == DEFAULT_TITLE and url not in NAMED_BY_THE_PROJECT))
        ):
            failures.append(f"{url}: a page without its own title ({title!r})")
        # a time shows as a date or a simulated clock, its Unix seconds in the tooltip only
        # (Django's admin and django-rq's pages are theirs, not the project's)
        epochs = [] if pattern(url)[0].startswith(OUTSIDE) else raw_epochs(" ".join(parser.text))
        if epochs:
            failures.append(f"{url}{' (htmx)' if htmx else ''}: raw Unix seconds in {epochs[:3]}")
        for href in parser.links:
            target = internal(url, href)
            if target:
                queue.append((target, False))
        for href in parser.htmx:
            target = internal(url, href)
            if target:
                queue.append((target, True))
    return visited, failures


@pytest.fixture
def busy_site(settings, tmp_path, redis_client):
    return build_busy_site(settings, tmp_path)


def test_every_page_answers_anonymous_visitors_and_staff_after_a_simulated_day(busy_site):
    # A failing view is a line of the report, not the end of the crawl.
    anonymous, staff = Client(raise_request_exception=False), Client(raise_request_exception=False)
    staff.force_login(busy_site.staff)
    counts = {}
    failures = []
    every_url = set()
    for who, client in [("anonymous", anonymous), ("staff", staff)]:
        visited, failed = crawl(client)
        counts[who] = len(visited)
        failures += [f"{who}: {line}" for line in failed]
        every_url |= {url for url, _ in visited}
    print(
        f"\ncrawled {counts['anonymous']} URLs as an anonymous visitor and {counts['staff']} "
        f"as staff ({len(every_url)} distinct)"
    )
    assert not failures, "\n".join(failures)
    # The crawl reached every page of the site from the links alone.
    reached = {pattern(url)[0] for url in every_url}
    missed = sorted(set(site_routes()) - reached - set(NOT_CRAWLED))
    assert not missed, f"no link leads to {missed}"
