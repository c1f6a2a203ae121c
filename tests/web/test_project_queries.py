"""Every query a project's pages make names its project (DESIGN.md "Rules of the road"): a
guard that makes an unfiltered query of a project table hard to write by accident.

Two projects hold rows of every kind a page shows (apps, hosts of one volunteer in both,
workunits, results, files, credit, teams, events); each project's pages are fetched with the
SQL they run captured (Django's CaptureQueriesContext), and every SELECT that reads a project
table (a model with a ``project`` column) must pass ``check_query``:

- it has a condition on a ``project_id`` column, and every project it names is the page's; or
- it has a lookup by primary key or by foreign key (``"t"."id" = 5``, ``"t"."host_id" IN
  (3, 4)``) of project rows, and every row it names is the page's project's: a host's
  results, a workunit's events, an app by its id. Such ids can only have come from a row the
  page already found in its project (or the row would be another project's and fail).

A query with neither, such as ``Workunit.objects.filter(name__startswith=...)`` or a count of
every host, fails, as does one filtered by another project. The rule reads the SQL with the
parameters in it (both databases' captured text), so it judges what reaches the database,
whatever ORM path made it. ``test_the_guard_fails_on_an_unfiltered_query`` shows it failing.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.core.cache import cache
from django.db import connection
from django.db.models import ForeignKey, Model
from django.test.utils import CaptureQueriesContext

from backend import server_status
from backend.daemons import validator
from backend.models import (
    Host,
    HostAppVersion,
    LifecycleEvent,
    Project,
    Result,
    UserCredit,
    Workunit,
)
from tests.factories import (
    NOW,
    AppFactory,
    AppVersionFactory,
    FileFactory,
    HostFactory,
    HostFileFactory,
    ProjectFactory,
    ResultFactory,
    TeamFactory,
    UserFactory,
    WorkunitFactory,
    demo_project,
)

pytestmark = pytest.mark.django_db

DAY = 86400


def project_models() -> list[type[Model]]:
    return [
        model
        for model in apps.get_models(include_auto_created=True)
        if any(f.name == "project" and f.related_model is Project for f in model._meta.concrete_fields)
    ]


# table -> model of every project table
PROJECT_TABLES = {model._meta.db_table: model for model in project_models()}
# (table, column) -> the project model it names: every primary key of a project table, and every
# foreign key (of any table, many-to-many tables included) to one
KEY_COLUMNS: dict[tuple[str, str], type[Model]] = {
    (model._meta.db_table, model._meta.pk.column): model for model in PROJECT_TABLES.values()
}
for model in apps.get_models(include_auto_created=True):
    for f in model._meta.concrete_fields:
        if isinstance(f, ForeignKey) and f.related_model in PROJECT_TABLES.values():
            KEY_COLUMNS[(model._meta.db_table, f.column)] = f.related_model  # type: ignore[assignment]

TABLE_REF = re.compile(r'(?:FROM|JOIN)\s+"(\w+)"(?:\s+(?:AS\s+)?"?(T\d+|U\d+)"?)?')
CONDITION = re.compile(r'"?(\w+)"?\."(\w+)"\s*(?:=\s*(\d+)\b|IN\s*\(([\d,\s]+)\))')


@dataclass
class Offence:
    sql: str
    reason: str

    def __str__(self) -> str:
        return f"{self.reason}:\n    {self.sql}"


def check_query(sql: str, project: Project) -> Offence | None:
    """Whether one captured SELECT keeps to ``project`` (the module's rule); None when it does."""
    if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
        return None
    aliases: dict[str, str] = {}
    for table, alias in TABLE_REF.findall(sql):
        aliases[table] = table
        if alias:
            aliases[alias] = table
    if not any(table in PROJECT_TABLES for table in aliases.values()):
        return None
    projects: set[int] = set()
    keyed: dict[type[Model], set[int]] = {}
    for qualifier, column, single, many in CONDITION.findall(sql):
        table = aliases.get(qualifier, qualifier)
        values = {int(single)} if single else {int(v) for v in many.replace(" ", "").split(",") if v}
        if column == "project_id" and table in PROJECT_TABLES:
            projects |= values
        elif (table, column) in KEY_COLUMNS:
            keyed.setdefault(KEY_COLUMNS[(table, column)], set()).update(values)
    if projects - {project.pk}:
        return Offence(sql, f"names project(s) {sorted(projects - {project.pk})}, not {project.slug}'s")
    for model, ids in keyed.items():
        theirs = model._base_manager.filter(pk__in=ids).exclude(project=project).values_list("pk", flat=True)
        if foreign := sorted(theirs):
            return Offence(sql, f"looks up {model.__name__} {foreign} of another project")
    if not projects and not keyed:
        return Offence(sql, "reads a project table with no project_id condition and no key of a project row")
    return None


def offences(queries: Iterable[dict[str, str]], project: Project) -> list[Offence]:
    return [found for q in queries if (found := check_query(q["sql"], project)) is not None]


def project_rows(project, volunteer, *, tag):
    """A project with one of everything its pages show, ``volunteer`` owning a host in it and
    credited there by a validator pass (with credit by app and a team)."""
    app = AppFactory(project=project, name=f"{tag}_app", max_success_results=1)
    version = AppVersionFactory(app=app)
    host = HostFactory(project=project, owner=volunteer, domain_name=f"{tag}-box", create_time=NOW - 3600)
    team = TeamFactory(project=project, name=f"{tag} team")
    UserCredit.objects.create(project=project, user=volunteer, team=team)
    HostAppVersion.objects.create(project=project, host=host, app_version=version)
    HostFileFactory(host=host, name=f"{tag}_data")
    wu = WorkunitFactory(app=app, name=f"{tag}_wu", rsc_fpops_est=1e12, rsc_fpops_bound=1e13, need_validate=True)
    result = ResultFactory(workunit=wu, host=host, app_version=version, reported=True, sent_time=NOW - DAY)
    FileFactory(result=result, md5_cksum="a")
    validator.run_once(project=project, now=NOW, batch_size=10, credit_by_app=True)
    LifecycleEvent.objects.create(project=project, time=NOW, actor="ops", host=host, field="max_ncpus_pct")
    return {"app": app.pk, "host": host.pk, "team": team.pk, "wu": wu.pk, "result": result.pk}


@pytest.fixture
def two_projects(db, settings, tmp_path, redis_client):
    settings.UPLOAD_DIR = tmp_path / "upload"
    volunteer = UserFactory(username="ann")
    demo, other = demo_project(), ProjectFactory(slug="other")
    return volunteer, {
        demo.slug: (demo, project_rows(demo, volunteer, tag="demo")),
        other.slug: (other, project_rows(other, volunteer, tag="other")),
    }


def page_paths(ids: dict[str, int], volunteer_id: int) -> list[str]:
    return [
        "status/",
        "status/?panel=community",
        "status.json",
        "status.xml",
        "config/",
        "workunits/",
        f"workunits/?app={ids['app']}&state=assimilated",
        "workunits.csv",
        f"workunits/{ids['wu']}/",
        f"workunits/actions/cancel/?id={ids['wu']}",
        f"results/{ids['result']}/",
        "hosts/",
        f"hosts/{ids['host']}/",
        f"hosts/{ids['host']}/prefs/",
        "users/",
        f"users/{volunteer_id}/",
        "teams/",
        f"teams/{ids['team']}/",
    ]


def crawl(client, project: Project, paths: list[str]) -> list[dict[str, str]]:
    """Fetch each of ``project``'s pages afresh (no cached status figures), the SQL captured."""
    cache.clear()
    client_redis = server_status._redis()
    client_redis.delete(server_status.figures_key(project))
    with CaptureQueriesContext(connection) as captured:
        for path in paths:
            headers = {"HX-Request": "true"} if "panel=" in path else {}
            response = client.get(f"/projects/{project.slug}/{path}", headers=headers)
            # a search by number that finds one row goes straight to it (302), one that finds
            # rows of several kinds lists them (200): which depends on the ids this test's rows
            # drew, which depend on the tests the worker ran before it
            found_one = path.startswith("search/") and response.status_code == 302
            assert response.status_code == 200 or found_one, (path, response.status_code)
            if response.streaming:
                b"".join(response.streaming_content)  # the CSV's rows are read as it streams
    return captured.captured_queries


def test_every_query_of_a_projects_pages_names_the_project(client, two_projects, django_user_model):
    volunteer, projects = two_projects
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    for project, ids in projects.values():
        queries = crawl(client, project, page_paths(ids, volunteer.pk))
        read = [q for q in queries if check_query(q["sql"], project) is None and PROJECT_TABLE_IN.search(q["sql"])]
        assert len(read) > 40  # the crawl did read the project's tables
        assert offences(queries, project) == []


PROJECT_TABLE_IN = re.compile("|".join(f'"{table}"' for table in PROJECT_TABLES))


def test_the_guard_fails_on_an_unfiltered_query(two_projects):
    """The guard's self-test: queries a page must not make are caught, the ones it may make
    pass."""
    _, projects = two_projects
    demo, demo_ids = projects["demo"]
    other, other_ids = projects["other"]

    def judged(run) -> list[Offence]:
        with CaptureQueriesContext(connection) as captured:
            run()
        return offences(captured.captured_queries, demo)

    # unfiltered: every workunit, hosts by name, a count of every result
    [found] = judged(lambda: list(Workunit.objects.all()))
    assert "no project_id condition" in found.reason
    assert len(judged(lambda: list(Host.objects.filter(domain_name__startswith="demo")))) == 1
    assert len(judged(lambda: Result.objects.count())) == 1
    # filtered by another project, or a key of another project's row
    [found] = judged(lambda: list(Workunit.objects.filter(project=other)))
    assert f"not {demo.slug}'s" in found.reason
    [found] = judged(lambda: list(Result.objects.filter(host_id=other_ids["host"])))
    assert "Host" in found.reason and "another project" in found.reason
    assert len(judged(lambda: Workunit.objects.filter(pk__in=[demo_ids["wu"], other_ids["wu"]]).count())) == 1
    # what pages do: filter by the project, or follow keys of its rows
    assert judged(lambda: list(Workunit.objects.filter(project=demo, name__startswith="demo"))) == []
    assert judged(lambda: list(Result.objects.filter(host_id=demo_ids["host"]))) == []
    assert judged(lambda: Workunit.objects.get(pk=demo_ids["wu"])) == []
    assert judged(lambda: list(Project.objects.all())) == []  # not a project table
