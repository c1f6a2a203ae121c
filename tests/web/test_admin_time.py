"""One way to show a time on a project's pages: a date and time on a live project, the world's
clock on a world's project (from World.start_time), the raw seconds on hover; the CSV exports
write the same text."""

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.urls import resolve

from backend.models import INT_MAX, Project
from backend.templatetags.boinc_time import clock_origin, time_text
from tests.factories import ProjectFactory, WorldFactory

pytestmark = pytest.mark.django_db

START = 1_800_000_000


def shown(project, value, empty=None):
    """What {% project_time %} renders on a page of ``project``."""
    request = RequestFactory().get(f"/projects/{project.slug}/status/")
    request.resolver_match = resolve(request.path)
    tag = "{% project_time t %}" if empty is None else "{% project_time t empty %}"
    return Template(tag).render(Context({"request": request, "t": value, "empty": empty}))


@pytest.fixture
def world_project():
    project = ProjectFactory(slug="world-x", kind=Project.Kind.WORLD, simulated_time=START + 90_000)
    WorldFactory(project=project, start_time=START)
    return project


def test_a_live_projects_times_are_dates_with_the_seconds_on_hover():
    live = ProjectFactory(slug="live")
    html = shown(live, 1795310963)
    assert ">2026-11-22 01:29:23</time>" in html and 'title="1795310963 (Unix seconds)"' in html
    assert clock_origin(live) is None


def test_a_worlds_times_read_as_its_clock_from_its_start(world_project):
    assert clock_origin(world_project) == START
    html = shown(world_project, START + 47_280)
    assert ">day 1, 13:08</time>" in html and f"{START + 47_280}" in html.split(">day")[0]
    assert ">day 2, 01:00<" in shown(world_project, START + 90_000)


def test_not_yet_and_never_read_as_words_on_either_clock(world_project):
    live = ProjectFactory(slug="live")
    for project in (live, world_project):
        assert shown(project, 0) == "–" and shown(project, INT_MAX) == "never"
        assert shown(project, 0, "never") == "never"


def test_a_world_project_without_its_world_row_shows_dates():
    orphan = ProjectFactory(slug="orphan", kind=Project.Kind.WORLD, simulated_time=START)
    assert clock_origin(orphan) is None
    assert ">2027-01-15 08:00:00</time>" in shown(orphan, START)


def test_the_csv_text_is_the_pages_text():
    assert time_text(1795310963, None) == "2026-11-22 01:29:23"
    assert time_text(START + 47_280, START) == "day 1, 13:08"
    assert time_text(0, START) == "" and time_text(INT_MAX, None) == "never"
