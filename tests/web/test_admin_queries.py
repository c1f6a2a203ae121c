"""The admin pages this change adds keep to their project, by the guard of
tests/web/test_project_queries.py: every query names the page's project or a key of one of its
rows, with two projects holding rows of every kind."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.web.test_project_queries import PROJECT_TABLE_IN, check_query, crawl, offences, two_projects  # noqa: F401

pytestmark = pytest.mark.django_db


def admin_paths(ids, volunteer_id):
    return [
        "results/",
        f"results/?outcome=1&host={ids['host']}&validate_state=1",
        "results.csv?server_state=5",
        "failures/?days=all",
        "failures/?days=1",
        "failures/hosts/?days=all",
        f"search/?q={ids['wu']}",
        "search/?q=demo",
        "search/?q=nothing-is-named-so",
        "workunits/?state=unsent",
        "workunits/?state=in_progress",
    ]


def test_every_query_of_the_admin_pages_names_the_project(client, two_projects, django_user_model):  # noqa: F811
    volunteer, projects = two_projects
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    for project, ids in projects.values():
        queries = crawl(client, project, admin_paths(ids, volunteer.pk))
        read = [q for q in queries if check_query(q["sql"], project) is None and PROJECT_TABLE_IN.search(q["sql"])]
        assert len(read) > 20
        assert offences(queries, project) == []


def test_every_query_of_a_search_that_finds_one_row_names_the_project(client, two_projects, django_user_model):  # noqa: F811
    volunteer, projects = two_projects
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    for project, ids in projects.values():
        tag = project.slug
        with CaptureQueriesContext(connection) as captured:
            for q in ("ann", f"{tag}_wu", f"{tag}-box", str(volunteer.pk), str(ids["host"])):
                page = client.get(f"/projects/{project.slug}/search/", {"q": q})
                assert page.status_code in (200, 302), q
            assert client.get(f"/projects/{project.slug}/search/", {"q": "ann"}).status_code == 302
        # A search by id looks the number up in every table, where it may be another project's
        # row's key: such a lookup is safe when the query also keeps to the page's project.
        found = [
            o
            for o in offences(captured.captured_queries, project)
            if not (o.reason.startswith("looks up") and f'"project_id" = {project.pk}' in o.sql)
        ]
        assert found == []


def test_search_for_another_projects_row_finds_nothing_here(client, two_projects):  # noqa: F811
    _, projects = two_projects
    demo, _ = projects["demo"]
    _, theirs = projects["other"]
    page = client.get(f"/projects/{demo.slug}/search/", {"q": "other_wu"})
    assert page.status_code == 200 and f"workunits/{theirs['wu']}/" not in page.content.decode()
