"""The project admin's path through a project's pages, after real activity: a small volunteer
world has run its project (hosts fetched, computed, failed and reported) and the demo project's
daemons have made their passes on the wall clock. The results list filters and exports what the
database holds, the failure summaries count the right rows, search finds rows by name and by id,
no page shows a raw Unix time, and a bad filter is a 400 that says why."""

import csv
import io
import re
from collections import Counter

import pytest
from django.core.management import call_command
from django.test import override_settings

from backend.jobs import run_all_daemons
from backend.models import Host, Outcome, Project, Result, ServerState, Workunit
from tests.factories import UserFactory, WorldFactory, demo_project
from tests.pages import by_testid, parse, rows
from tests.shared_rows import shared_rows
from world import jobs
from world.models import World

pytestmark = pytest.mark.django_db

HOUR = 3600.0
ERRORS = (Outcome.CLIENT_ERROR, Outcome.NO_REPLY, Outcome.VALIDATE_ERROR, Outcome.CLIENT_DETACHED)
# a Unix time written out: 9 or 10 digits standing alone (not a part of a name, such as a world's
# workunit "w1_data000001__w1_einstein_1800000763_39", nor of a number with separators)
EPOCH = re.compile(r"(?<![\w.,])\d{9,10}(?![\w.,])")


def build(data_dir):
    with override_settings(
        BOINCWEB_DATA_DIR=data_dir, DOWNLOAD_DIR=data_dir / "download", UPLOAD_DIR=data_dir / "upload"
    ):
        UserFactory(username="boss", is_staff=True)
        world = WorldFactory(
            name="failing",
            hosts=6,
            days=0.5,
            seed=41,
            settings={"cushion": 8, "error_rate": 0.2, "daemon_interval": HOUR, "job_gflop": 3.0 * HOUR},
        )
        with jobs.unsynced_commits():
            sim = jobs.create_simulation(world)
            sim.run_until(10 * HOUR)
            jobs.store(world.pk, sim, status=World.Status.PAUSED)
        call_command("seed_demo", "--workunits", "6", "--hosts", "2", stdout=io.StringIO())
        for _ in range(2):
            run_all_daemons()
        world.refresh_from_db()
        return world


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    yield from shared_rows(django_db_blocker, lambda: build(data_dir))


@pytest.fixture(autouse=True)
def own_redis(redis_client):
    """The figures and history the status pages and daemon passes keep in Redis are emptied
    before and after each test, so that no later test reads this module's counts."""
    return redis_client


@pytest.fixture
def project(world):
    return Project.objects.get(pk=world.project_id)


@pytest.fixture
def staff(client, world):
    client.force_login(UserFactory._meta.model.objects.get(username="boss"))
    return client


def base(project):
    return f"/projects/{project.slug}/"


def listed_names(page):
    return [row[0] for row in rows(by_testid(parse(page), "results"))]


def csv_rows(response):
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def all_pages(client, url):
    """The names of every row of a paged results list, following its "next" links."""
    names = []
    while url:
        page = client.get(url)
        assert page.status_code == 200, url
        names += listed_names(page)
        link = parse(page).find("a", rel="next")
        url = url.split("?")[0] + link["href"] if link else None
    return names


def test_the_world_made_failures_to_look_at(project):
    results = Result.objects.filter(project=project, server_state=ServerState.OVER)
    assert results.filter(outcome=Outcome.SUCCESS).exists()
    assert results.filter(outcome=Outcome.CLIENT_ERROR).count() >= 3


def test_results_list_filters_by_outcome_and_its_csv_holds_the_same_rows(client, project):
    expected = Result.objects.filter(project=project, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)
    url = f"{base(project)}results/?outcome={Outcome.CLIENT_ERROR}"
    page = parse(client.get(url))
    n = expected.count()
    assert by_testid(page, "match-count").get_text(" ", strip=True).startswith(f"{n} result")
    states = {row[6] for row in rows(by_testid(page, "results"))}
    assert states == {"client error"}
    assert sorted(all_pages(client, url)) == sorted(expected.values_list("name", flat=True))
    exported = csv_rows(client.get(f"{base(project)}results.csv?outcome={Outcome.CLIENT_ERROR}"))
    assert sorted(int(r["id"]) for r in exported) == sorted(expected.values_list("id", flat=True))
    assert {r["outcome"] for r in exported} == {str(Outcome.CLIENT_ERROR.value)}
    # times in the export read as on the pages: the world's clock, never raw seconds
    sent = [r["sent_time"] for r in exported]
    assert all(s.startswith("day ") for s in sent) and not any(EPOCH.search(s) for s in sent)


def test_results_list_filters_by_host_and_its_csv_matches(client, project):
    host_id, n = Counter(
        Result.objects.filter(project=project).exclude(host=None).values_list("host_id", flat=True)
    ).most_common(1)[0]
    expected = set(Result.objects.filter(project=project, host_id=host_id).values_list("name", flat=True))
    url = f"{base(project)}results/?host={host_id}"
    assert by_testid(parse(client.get(url)), "match-count").get_text(" ", strip=True).startswith(f"{n} result")
    assert set(all_pages(client, url)) == expected
    exported = csv_rows(client.get(f"{base(project)}results.csv?host={host_id}"))
    assert {r["name"] for r in exported} == expected and {r["host_id"] for r in exported} == {str(host_id)}


def test_results_list_combines_filters(client, project):
    failed = Result.objects.filter(project=project, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)
    one = failed.exclude(app_version=None).first()
    query = (
        f"outcome=3&exit_status={one.exit_status}&app_version={one.app_version_id}&platform={one.app_version.platform}"
    )
    expected = failed.filter(exit_status=one.exit_status, app_version=one.app_version_id)
    exported = csv_rows(client.get(f"{base(project)}results.csv?{query}"))
    assert sorted(int(r["id"]) for r in exported) == sorted(expected.values_list("id", flat=True))


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("outcome=banana", "outcome"),
        ("outcome=9", "outcome"),
        ("exit_status=1.5", "exit status must be a whole number"),
        ("host=99999999", "no host 99999999 in this project"),
        ("host=-1", "host"),
        ("app_version=99999999", "no app version 99999999 in this project"),
        ("platform=vax-dec-vms", "no app version of platform vax-dec-vms in this project"),
        ("validate_state=x", "validate_state"),
        ("after=zzz", "is not a page cursor"),
    ],
)
def test_a_bad_results_filter_is_a_400_that_says_why_on_the_page_and_in_the_csv(client, project, query, reason):
    page = client.get(f"{base(project)}results/?{query}")
    assert page.status_code == 400
    assert reason in by_testid(parse(page), "filter-errors").get_text(" ", strip=True)
    export = client.get(f"{base(project)}results.csv?{query}")
    assert export.status_code == 400 and reason in export.content.decode()


def test_another_projects_host_is_not_a_filter_of_this_one(client, project):
    theirs = Host.objects.filter(project=demo_project()).first()
    page = client.get(f"{base(project)}results/?host={theirs.pk}")
    assert page.status_code == 400 and f"no host {theirs.pk} in this project" in page.content.decode()


def test_failure_summary_by_app_version_counts_each_kind_of_failure(client, project):
    page = parse(client.get(f"{base(project)}failures/?days=all"))
    failed = Result.objects.filter(project=project, server_state=ServerState.OVER, outcome__in=ERRORS)
    expected = Counter(failed.values_list("app_version_id", "outcome", "exit_status"))
    shown = Counter()
    for tr in by_testid(page, "failures").find_all("tr", attrs={"data-outcome": True}):
        key = (int(tr["data-version"]) if tr["data-version"] else None, int(tr["data-outcome"]), int(tr["data-exit"]))
        shown[key] += int(tr.find_all("td")[-1].get_text(strip=True).replace(",", ""))
    assert shown == expected and sum(shown.values()) == failed.count() > 0
    assert by_testid(page, "failure-total").get_text(" ", strip=True).startswith(f"{failed.count()} failed")
    # each count links to the results it counts
    link = by_testid(page, "failures").find("a")
    exported = csv_rows(client.get(link["href"].replace("/results/", "/results.csv")))
    assert len(exported) == int(link.get_text(strip=True).replace(",", ""))


def test_failure_summary_by_host_lists_the_hosts_with_most_errors_first(client, project):
    page = parse(client.get(f"{base(project)}failures/hosts/?days=all"))
    failed = Result.objects.filter(project=project, server_state=ServerState.OVER, outcome__in=ERRORS).exclude(
        host=None
    )
    expected = Counter(failed.values_list("host_id", flat=True))
    shown = {
        int(tr["data-host"]): int(tr.find(attrs={"data-count": "failed"}).get_text(strip=True))
        for tr in by_testid(page, "failures").find_all("tr", attrs={"data-host": True})
    }
    assert shown == dict(expected)
    counts = [
        shown[int(tr["data-host"])] for tr in by_testid(page, "failures").find_all("tr", attrs={"data-host": True})
    ]
    assert counts == sorted(counts, reverse=True)


def test_failure_summaries_look_back_over_the_window_on_the_projects_clock(client, project):
    now = project.now()
    recent = Result.objects.filter(
        project=project, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR, received_time__gt=now - 86400
    ).count()
    page = parse(client.get(f"{base(project)}failures/?days=1"))
    shown = sum(
        int(tr.find_all("td")[-1].get_text(strip=True))
        for tr in by_testid(page, "failures").find_all("tr", attrs={"data-outcome": str(Outcome.CLIENT_ERROR.value)})
    )
    assert shown == recent
    bad = client.get(f"{base(project)}failures/?days=3")
    assert bad.status_code == 400 and "days" in bad.content.decode()


def test_search_finds_a_result_and_a_workunit_by_name(client, project):
    result = Result.objects.filter(project=project).order_by("id").last()
    found = client.get(f"{base(project)}search/", {"q": result.name})
    assert found.status_code == 302 and found["Location"] == f"{base(project)}results/{result.pk}/"
    wu = Workunit.objects.filter(project=project).order_by("id").last()
    found = client.get(f"{base(project)}search/", {"q": wu.name})
    assert found.status_code == 302 and found["Location"] == f"{base(project)}workunits/{wu.pk}/"


def test_search_finds_rows_by_id_and_lists_them_when_several_kinds_match(client, project):
    wu = Workunit.objects.filter(project=project).order_by("id").first()
    page = client.get(f"{base(project)}search/", {"q": str(wu.pk)})
    if page.status_code == 302:
        assert page["Location"] == f"{base(project)}workunits/{wu.pk}/"
    else:
        links = {a["href"]: a.get_text() for a in by_testid(parse(page), "search-matches").find_all("a")}
        assert links[f"{base(project)}workunits/{wu.pk}/"] == wu.name
    # a host by its id, shown to an anonymous visitor as "host <id>"
    host = Host.objects.filter(project=project).order_by("-id").first()
    found = client.get(f"{base(project)}search/", {"q": str(host.pk)})
    if found.status_code == 302:
        assert found["Location"] == f"{base(project)}hosts/{host.pk}/"
    else:
        links = {a["href"]: a.get_text() for a in by_testid(parse(found), "search-matches").find_all("a")}
        assert links[f"{base(project)}hosts/{host.pk}/"] == f"host {host.pk}"


def test_search_finds_a_user_by_name_and_a_prefix_lists_names(client, project):
    owner = Host.objects.filter(project=project).first().owner
    found = client.get(f"{base(project)}search/", {"q": owner.username})
    assert found.status_code == 302 and found["Location"] == f"{base(project)}users/{owner.pk}/"
    wu = Workunit.objects.filter(project=project).order_by("name").first()
    prefix = wu.name[:-2]
    page = client.get(f"{base(project)}search/", {"q": prefix})
    names = [a.get_text() for a in by_testid(parse(page), "search-matches").find_all("a")]
    assert wu.name in names and all(n.startswith(prefix) for n in names)


def test_search_keeps_to_the_project_and_says_when_nothing_matches(client, project):
    theirs = Workunit.objects.filter(project=demo_project()).first()
    page = client.get(f"{base(project)}search/", {"q": theirs.name})
    assert page.status_code == 200 and "Nothing in this project is named" in page.content.decode()
    assert client.get(f"{base(project)}search/", {"q": "x" * 300}).status_code == 400


def test_search_by_a_hosts_domain_name_is_for_its_owner_and_staff(client, staff, project):
    host = Host.objects.filter(project=project).first()
    found = staff.get(f"{base(project)}search/", {"q": host.domain_name})
    assert found.status_code == 302 and found["Location"] == f"{base(project)}hosts/{host.pk}/"
    client.logout()
    page = client.get(f"{base(project)}search/", {"q": host.domain_name})
    assert page.status_code == 200 and f"hosts/{host.pk}/" not in page.content.decode()


def project_pages(client, project):
    """Every kind of the project's admin pages, with rows on them."""
    wu = Workunit.objects.filter(project=project, results__isnull=False).order_by("id").first()
    result = Result.objects.filter(project=project).order_by("host_id", "id").last()
    host = Host.objects.filter(project=project).order_by("id").first()
    paths = [
        "status/",
        "workunits/",
        "workunits/?state=in_progress",
        f"workunits/{wu.pk}/",
        "results/",
        f"results/{result.pk}/",
        "hosts/",
        f"hosts/{host.pk}/",
        f"users/{host.owner_id}/",
        "users/",
        "teams/",
        "config/",
        "failures/?days=all",
        "failures/hosts/?days=all",
        f"search/?q={wu.name[:-1]}",
    ]
    for path in paths:
        page = client.get(base(project) + path)
        assert page.status_code == 200, path
        yield path, parse(page)


def shown_text(tree):
    """What a person reads: the page's text without its scripts (chart data) and styles."""
    for tag in tree(["script", "style"]):
        tag.decompose()
    return tree.get_text(" ")


def test_no_project_page_of_a_world_shows_a_raw_unix_time(staff, project):
    assert project.simulated_time is not None
    clocks = 0
    for path, tree in project_pages(staff, project):
        text = shown_text(tree)
        found = [text[max(0, m.start() - 80) : m.end() + 20] for m in EPOCH.finditer(text)]
        assert not found, (path, found[:3])
        clocks += len(re.findall(r"day \d+, \d\d:\d\d", text))
    assert clocks > 50  # the times are there, on the world's clock


def test_no_project_page_of_a_live_project_shows_a_raw_unix_time(staff, world):
    live = demo_project()
    dates = 0
    for path, tree in project_pages(staff, live):
        text = shown_text(tree)
        assert not EPOCH.findall(text), (path, EPOCH.findall(text)[:5])
        dates += len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text))
    assert dates > 20


def test_a_workunits_lifecycle_names_its_results_and_credit_is_rounded(client, project):
    wu = Workunit.objects.filter(project=project, canonical_credit__gt=0).order_by("id").first()
    page = parse(client.get(f"{base(project)}workunits/{wu.pk}/"))
    events = by_testid(page, "events")
    names = set(wu.results.values_list("name", flat=True))
    linked = {a.get_text() for a in events.find_all("a")}
    assert linked and linked <= names
    assert not re.search(r"result \d+", events.get_text(" "))
    credit = by_testid(page, "wu-fields").find("dt", string="granted credit").find_next("dd").get_text(strip=True)
    assert len(credit.replace(",", "").replace(".", "")) <= max(3, len(str(int(wu.canonical_credit))))


def test_workunit_list_counts_matches_and_sums_up_each_workunits_results(client, project):
    page = parse(client.get(f"{base(project)}workunits/?state=in_progress"))
    expected = Workunit.objects.filter(project=project, results__server_state=ServerState.IN_PROGRESS).distinct()
    n = expected.count()
    assert n > 0
    assert by_testid(page, "match-count").get_text(" ", strip=True).startswith(f"{n} workunit")
    first = max(expected.values_list("id", flat=True))
    row = page.find("input", value=str(first)).find_parent("tr")
    summary = row.find(attrs={"data-testid": "result-summary"}).get_text(strip=True)
    states = Counter(
        "in progress"
        if s == ServerState.IN_PROGRESS
        else "unsent"
        if s <= ServerState.UNSENT
        else Outcome(o).label.lower()
        for s, o in Result.objects.filter(workunit_id=first).values_list("server_state", "outcome")
    )
    assert sorted(summary.split(", ")) == sorted(f"{k} {label}" for label, k in states.items())
    unsent = parse(client.get(f"{base(project)}workunits/?state=unsent"))
    n_unsent = Workunit.objects.filter(project=project, results__server_state=ServerState.UNSENT).distinct().count()
    assert by_testid(unsent, "match-count").get_text(" ", strip=True).startswith(f"{n_unsent} workunit")


def test_a_bulk_action_with_nothing_ticked_says_to_tick_a_workunit(staff, project):
    page = staff.get(f"{base(project)}workunits/actions/cancel/")
    assert page.status_code == 400
    assert "Tick at least one workunit." in by_testid(parse(page), "action-errors").get_text(" ", strip=True)
