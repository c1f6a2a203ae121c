import re

import django_rq
import pytest
from django.contrib import admin
from django.urls import reverse

from boincweb import health


@pytest.mark.django_db
def test_home_page_links_the_pages_and_reports_redis(client, redis_client):
    page = client.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    for link in ["/lab/", "/project/status/", "/project/workunits/", "/project/worlds/"]:
        assert f'href="{link}"' in html
    assert 'data-testid="redis-status"' in html
    assert "alive" in html
    assert "<html" in html and "htmx" in html


@pytest.mark.django_db
def test_home_health_fragment_is_just_the_panel_for_htmx(client, redis_client):
    page = client.get("/", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.lstrip().startswith('<section id="health"')
    assert "<html" not in html
    assert 'hx-trigger="every 2s"' in html


@pytest.mark.django_db
def test_health_counts_live_rq_workers(redis_client):
    assert health.check().workers == 0
    worker = django_rq.get_worker("default")
    worker.register_birth()
    try:
        state = health.check()
        assert state.redis_ok and state.workers == 1 and state.all_ok
    finally:
        worker.register_death()


def test_health_reports_an_unreachable_redis(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    state = health.check()
    assert not state.redis_ok and not state.all_ok
    assert state.redis_error


@pytest.mark.django_db
def test_plotly_is_served_from_our_own_static_files(client):
    """Every page script comes from our static files (no CDN), plotly among them, and the
    file behind it is our partial bundle of the plotly.js release the pinned plotly package
    bundles."""
    from django.conf import settings
    from django.contrib.staticfiles import finders
    from plotly.offline import get_plotlyjs_version

    sources = {}
    for template in (settings.BASE_DIR / "templates").rglob("*.html"):
        for src in re.findall(r'<script[^>]*\ssrc="([^"]*)"', template.read_text()):
            sources.setdefault(src, template.name)
    outside = {src: name for src, name in sources.items() if not src.startswith("{% static ")}
    assert outside == {}, f"scripts not served from our static files: {outside}"
    assert "{% static 'vendor/plotly/plotly.min.js' %}" in sources
    bundle = finders.find("vendor/plotly/plotly.min.js")
    with open(bundle, encoding="utf-8") as fh:
        head = fh.read(300)
    assert f"plotly.js (boincweb - minified) v{get_plotlyjs_version()}\n" in head
    assert finders.find("css/boincweb.css")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model", [m for m in admin.site._registry if m._meta.app_label == "backend"], ids=lambda m: m._meta.model_name
)
def test_admin_list_and_add_pages_load(admin_client, model):
    opts = model._meta
    listing = admin_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    assert listing.status_code == 200
    adding = admin_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"))
    assert adding.status_code == 200


@pytest.mark.django_db
def test_admin_filters_and_search_work_on_results(admin_client):
    url = reverse("admin:backend_result_changelist")
    assert admin_client.get(url, {"server_state__exact": 4, "q": "wu"}).status_code == 200


def test_admin_needs_a_login(client):
    assert client.get("/admin/backend/workunit/").status_code == 302
