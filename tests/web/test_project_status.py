from datetime import timedelta
from xml.etree import ElementTree

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from backend import server_status as server_status_module
from backend.charts import queue_history_figures
from backend.daemons import daemon_names, run_pass
from backend.jobs import run_all_daemons
from backend.models import (
    DaemonStatus,
    Host,
    Outcome,
    Project,
    Result,
    ServerState,
    UserCredit,
    ValidateState,
)
from backend.server_status import (
    community,
    hours,
    queue_history,
    record_history,
    server_status,
    status_xml,
)
from tests.factories import NOW, AppFactory, HostFactory, ProjectFactory, UserFactory, demo_project
from tests.pages import count, parse, texts
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    stranger,
    versions,
)

pytestmark = pytest.mark.django_db

VALID = (ServerState.OVER, Outcome.SUCCESS, ValidateState.VALID)


@pytest.fixture(autouse=True)
def fresh_cache():
    """The community figures are cached; each test starts without them."""
    cache.clear()
    yield
    cache.clear()


def test_status_counts_results_and_workunits_by_state(busy_workunit, app):
    make_workunits(app, 2, start=10, transition_time=NOW - 7200)
    status = server_status(NOW, project=demo_project())
    assert status.results_ready_to_send == 1
    assert status.results_in_progress == 1
    assert status.workunits_waiting_for_validation == 1
    assert status.transitioner_backlog_workunits == 2
    assert status.transitioner_backlog_hours == 2.0
    [row] = status.apps
    assert (row.unsent, row.in_progress_cpu, row.in_progress_gpu) == (1, 0, 1)


def test_status_splits_in_progress_results_into_cpu_and_gpu(app, host, versions):
    wu = make_workunits(app, 1)[0]
    in_progress = (ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT)
    make_results(wu, [in_progress, in_progress], host=host, app_version=versions[0])
    [row] = server_status(NOW, project=demo_project()).apps
    assert (row.in_progress_cpu, row.in_progress_gpu, row.in_progress) == (2, 0, 2)


def test_daemons_show_running_not_running_and_disabled():
    recent = timezone.now() - timedelta(seconds=10)
    DaemonStatus.objects.create(project=demo_project(), name="transitioner", last_pass_time=recent, passes=3)
    DaemonStatus.objects.create(project=demo_project(), name="validator", last_pass_time=recent - timedelta(hours=1))
    DaemonStatus.objects.create(project=demo_project(), name="assimilator", enabled=False, last_pass_time=recent)
    states = {d.name: d.status for d in server_status(NOW, project=demo_project()).daemons}
    assert states["transitioner"] == "running"
    assert states["validator"] == "not running"
    assert states["assimilator"] == "disabled"


def test_a_registered_daemon_that_never_ran_is_not_running():
    states = {d.name: (d.status, d.last_pass_time) for d in server_status(NOW, project=demo_project()).daemons}
    assert states["transitioner"] == ("not running", "")


def test_status_page_shows_the_daemons_counts_and_queues(
    client, busy_workunit, redis_client, django_assert_max_num_queries
):
    # the panels' 12, the community figures' 5 (cached for a minute after), the app versions 1
    with django_assert_max_num_queries(19):
        page = client.get("/project/status/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<html" in html and 'data-daemon="transitioner"' in html
    assert 'data-count="results_ready_to_send">1<' in html
    assert "/django-rq/queues/0/" in html
    assert 'data-figure="apps-figure"' in html and "plotly.min.js" in html


def test_status_fragment_is_the_polling_panel(client, busy_workunit, redis_client):
    page = client.get("/project/status/", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.lstrip().startswith('<div id="status-panel"')
    assert 'hx-trigger="every 2s"' in html and "<html" not in html


def test_status_queries_do_not_grow_with_rows(client, app, redis_client, django_assert_max_num_queries):
    for start in range(0, 40, 10):
        for wu in make_workunits(app, 10, start=start):
            make_results(wu, [(ServerState.UNSENT, Outcome.INIT, ValidateState.INIT)])
    with django_assert_max_num_queries(13):
        assert client.get("/project/status/", HTTP_HX_REQUEST="true").status_code == 200


def test_status_page_renders_after_every_daemon_has_passed(client, busy_workunit, redis_client, settings, tmp_path):
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"
    for name in daemon_names():
        run_pass(name, project=demo_project(), now=NOW)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        page = client.get("/project/status/", **headers)
        assert page.status_code == 200
        tree = parse(page)
        for name in daemon_names():
            row = tree.find("tr", attrs={"data-daemon": name})
            assert "running" in row.get_text() and "never" not in row.get_text()
            last_pass = row.find("time")
            assert last_pass["datetime"] and last_pass.get_text() == "0\xa0minutes ago"


def test_status_json_has_the_boinc_figures(client, busy_workunit, redis_client):
    data = client.get("/project/status.json").json()
    assert data["results_ready_to_send"] == 1
    assert data["results_in_progress"] == 1
    assert data["apps"][0]["in_progress_gpu"] == 1
    assert data["rq"]["ok"] is True
    assert {q["name"] for q in data["rq"]["queues"]} >= {"default"}


def test_status_xml_is_boinc_shaped(client, busy_workunit, redis_client):
    page = client.get("/project/status.xml")
    assert page["Content-Type"].startswith("application/xml")
    root = ElementTree.fromstring(page.content)
    assert root.tag == "server_status"
    assert root.findtext("database_file_states/results_ready_to_send") == "1"
    assert root.findtext("daemon_status/daemon/command") == "transitioner"
    [app] = root.findall("database_file_states/tasks_by_app/app")
    assert [child.tag for child in app] == [
        "id",
        "name",
        "unsent",
        "in_progress",
        "avg_runtime",
        "min_runtime",
        "max_runtime",
        "users",
        "in_progress_cpu",
        "in_progress_gpu",
    ]
    assert (app.findtext("name"), app.findtext("unsent"), app.findtext("in_progress")) == ("einstein", "1", "1")
    states = [child.tag for child in root.find("database_file_states")]
    assert states[7:] == [
        "users_with_recent_credit",
        "users_with_credit",
        "users_registered_in_past_24_hours",
        "hosts_with_recent_credit",
        "hosts_with_credit",
        "hosts_registered_in_past_24_hours",
        "current_floating_point_speed",
        "tasks_by_app",
    ]


def test_status_xml_of_an_empty_project_has_no_apps():
    root = ElementTree.fromstring(status_xml(server_status(NOW, project=demo_project())))
    apps = root.find("database_file_states/tasks_by_app")
    assert apps is not None and not list(apps)


@pytest.mark.parametrize(
    "seconds, shown",
    [
        (0, 0.0),
        (1, 0.01),
        (36, 0.01),
        (37, 0.02),
        (1800, 0.5),
        (3600, 1.0),
        (252, 0.07),
        (3601, 1.01),
    ],
)
def test_run_times_are_hours_rounded_up_to_a_hundredth(seconds, shown):
    assert hours(seconds) == shown


def test_app_run_times_cover_valid_results_received_in_the_past_day(app, host, stranger):
    seti = AppFactory(name="seti")
    wu = make_workunits(app, 1)[0]
    invalid = (ServerState.OVER, Outcome.SUCCESS, ValidateState.INVALID)
    results = make_results(wu, [VALID] * 5 + [invalid], host=host)
    recent = NOW - 3600
    # (elapsed seconds, received time, returned by the stranger?)
    timings = [
        (1800, recent, False),
        (3600, recent, False),
        (5400, recent, False),
        (7200, recent, True),
        (99_000, NOW - 86_400, True),
        (99_000, recent, True),
    ]
    for result, (elapsed, received, by_stranger) in zip(results, timings):
        Result.objects.filter(pk=result.pk).update(
            elapsed_time=elapsed, received_time=received, **({"user": stranger} if by_stranger else {})
        )
    figures = community(NOW, demo_project())
    runtime = figures.runtime(app.id)
    # 1800, 3600, 5400 and 7200 s: 4500 s on average, returned by two users; the result
    # received a day ago and the invalid one are left out
    assert (runtime.avg_runtime, runtime.min_runtime, runtime.max_runtime, runtime.users) == (1.25, 0.5, 2.0, 2)
    assert figures.runtime(seti.id).max_runtime == 0.0


def test_users_and_hosts_figures_follow_boincs_thresholds(owner, stranger):
    get_user_model().objects.filter(pk=stranger.pk).update(date_joined=timezone.now() - timezone.timedelta(days=3))
    Host.objects.bulk_create(
        [
            Host(
                project=demo_project(),
                owner=owner,
                domain_name="a",
                total_credit=0.5,
                expavg_credit=0.6,
                create_time=NOW,
            ),
            Host(
                project=demo_project(),
                owner=owner,
                domain_name="b",
                total_credit=0.7,
                expavg_credit=0.6,
                create_time=NOW - 90_000,
            ),
            Host(
                project=demo_project(),
                owner=stranger,
                domain_name="c",
                total_credit=500,
                expavg_credit=400,
                create_time=NOW - 100,
            ),
        ]
    )
    # the users' credit is what the validator granted them (their UserCredit rows), as BOINC's
    # page counts the user table
    UserCredit.objects.create(project=demo_project(), user=owner, total_credit=1.2, expavg_credit=1.2)
    UserCredit.objects.create(project=demo_project(), user=stranger, total_credit=500, expavg_credit=400)
    figures = community(NOW, demo_project())
    # owner: 1.2 total and 1.2 recent over two hosts; neither host alone passes 1
    assert (figures.users_with_credit, figures.users_with_recent_credit) == (2, 2)
    assert (figures.hosts_with_credit, figures.hosts_with_recent_credit) == (1, 1)
    assert figures.hosts_registered_in_past_24_hours == 2
    # a user joined the project with their first host in it (BOINC's user.create_time): the
    # stranger's, 100 s before NOW, though their login is 3 days old; the owner's first host is
    # 25 hours old, though their login was made just now
    assert figures.users_registered_in_past_24_hours == 1
    assert community(NOW + 80_000, demo_project()).users_registered_in_past_24_hours == 1
    assert community(NOW + 86_400, demo_project()).users_registered_in_past_24_hours == 0
    assert figures.current_floating_point_speed == round(401.2 / 200, 2)


def test_users_registered_are_the_projects_own_on_its_clock_in_every_output(client, redis_client):
    """A world's project counts the volunteers whose first host in it came in the day before
    its clock: not a login made today with no host there, nor a volunteer whose new host is in
    another project; status.json, status.xml and the page say the same."""
    world = ProjectFactory(slug="world-x", kind=Project.Kind.WORLD, simulated_time=NOW)
    newcomer, veteran, elsewhere = (UserFactory(username=n) for n in ("newcomer", "veteran", "elsewhere"))
    HostFactory(project=world, owner=newcomer, create_time=NOW - 100)
    HostFactory(project=world, owner=veteran, create_time=NOW - 3 * 86_400)
    HostFactory(project=world, owner=veteran, create_time=NOW - 50)  # a second host: not a new user
    HostFactory(project=world, owner=elsewhere, create_time=NOW - 5 * 86_400)
    HostFactory(project=demo_project(), owner=elsewhere, create_time=NOW - 10)
    UserFactory(username="login-only")  # date_joined now, no host anywhere
    cache.clear()
    assert client.get("/projects/world-x/status.json").json()["community"]["users_registered_in_past_24_hours"] == 1
    xml = ElementTree.fromstring(client.get("/projects/world-x/status.xml").content)
    assert xml.findtext("database_file_states/users_registered_in_past_24_hours") == "1"
    assert xml.findtext("database_file_states/hosts_registered_in_past_24_hours") == "2"
    page = parse(client.get("/projects/world-x/status/"))
    assert count(page, "users_registered_in_past_24_hours") == "1"
    # the demo, on the wall clock, has had no volunteer join in the day before now
    assert client.get("/project/status.json").json()["community"]["users_registered_in_past_24_hours"] == 0


def credited_host_with_a_valid_result(app, host, *, expavg_credit):
    """``host`` with 50 credit and a valid result of 1.5 hours received just now."""
    Host.objects.filter(pk=host.pk).update(total_credit=50, expavg_credit=expavg_credit)
    UserCredit.objects.update_or_create(
        project=demo_project(), user=host.owner, defaults=dict(total_credit=50, expavg_credit=expavg_credit)
    )
    wu = make_workunits(app, 1)[0]
    [result] = make_results(wu, [VALID], host=host)
    Result.objects.filter(pk=result.pk).update(elapsed_time=5400, received_time=int(timezone.now().timestamp()))


def test_status_json_and_xml_carry_the_community_figures(client, app, host, redis_client):
    credited_host_with_a_valid_result(app, host, expavg_credit=20)
    data = client.get("/project/status.json").json()
    assert data["community"]["hosts_with_credit"] == 1
    assert data["community"]["current_floating_point_speed"] == 0.1
    assert (data["apps"][0]["avg_runtime"], data["apps"][0]["users"]) == (1.5, 1)
    root = ElementTree.fromstring(client.get("/project/status.xml").content)
    assert root.findtext("database_file_states/users_with_credit") == "1"
    assert root.findtext("database_file_states/tasks_by_app/app/max_runtime") == "1.5"


def test_community_figures_are_cached_between_fetches(client, app, host, redis_client, django_assert_max_num_queries):
    client.get("/project/status.json")
    Host.objects.filter(pk=host.pk).update(total_credit=50)
    with django_assert_max_num_queries(12):  # the status figures only
        data = client.get("/project/status.json").json()
    assert data["community"]["hosts_with_credit"] == 0
    cache.clear()
    assert client.get("/project/status.json").json()["community"]["hosts_with_credit"] == 1


@pytest.mark.parametrize("path", ["/project/status.json", "/project/status.xml"])
def test_status_exports_run_the_same_queries_for_more_rows(
    client, app, owner, path, redis_client, django_assert_max_num_queries
):
    def add(n, start):
        hosts = [
            HostFactory(owner=owner, domain_name=f"box-{start + i}", total_credit=5, expavg_credit=5, create_time=NOW)
            for i in range(n)
        ]
        for i, wu in enumerate(make_workunits(app, n, start=start)):
            make_results(wu, [VALID, (ServerState.UNSENT, Outcome.INIT, ValidateState.INIT)], host=hosts[i])
        AppFactory(name=f"app-{start}")

    add(1, 0)
    with django_assert_max_num_queries(17):
        assert client.get(path).status_code == 200
    cache.clear()
    add(30, 100)
    with django_assert_max_num_queries(17):
        assert client.get(path).status_code == 200


def test_status_reports_an_unreachable_redis(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    page = client.get("/project/status/")
    assert page.status_code == 200
    assert "Redis not reachable" in page.content.decode()


def test_status_refuses_post(client):
    assert client.post("/project/status/").status_code == 405


# --- parity with BOINC's status page, and the queues' history --------------------------------


def test_status_page_shows_users_computers_speed_and_run_times(client, app, host, redis_client):
    credited_host_with_a_valid_result(app, host, expavg_credit=400)
    tree = parse(client.get("/project/status/"))
    assert count(tree, "users_with_recent_credit") == "1"
    assert count(tree, "hosts_with_credit") == "1"
    assert count(tree, "current_floating_point_speed") == "2.0"
    row = tree.find("tr", attrs={"data-app": "einstein"})
    assert texts(row.find_all("td")) == ["einstein", "1.5 h", "1.5 h", "1.5 h", "1"]


def test_the_community_panel_is_a_fragment_of_its_own(client, app, redis_client, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        page = client.get("/project/status/?panel=community", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert html.lstrip().startswith('<section id="status-community"')
    assert 'hx-trigger="every 60s"' in html and 'data-app="einstein"' in html
    assert "status-panel" not in html and "<html" not in html


def test_an_unknown_status_panel_is_refused_by_name(client):
    page = client.get("/project/status/?panel=daemons", HTTP_HX_REQUEST="true")
    assert page.status_code == 400
    assert page.content.decode() == "no panel 'daemons'; choose one of panel, community, history"


def test_the_history_keeps_the_last_samples_oldest_first(app, redis_client, monkeypatch):
    monkeypatch.setattr(server_status_module, "HISTORY_SAMPLES", 3)
    for i in range(5):
        make_workunits(app, 1, start=i, transition_time=NOW)
        record_history(NOW + 10 * i, demo_project())
    samples = queue_history(demo_project())
    assert [s["time"] for s in samples] == [NOW + 20, NOW + 30, NOW + 40]
    assert [s["transitioner_backlog_workunits"] for s in samples] == [3, 4, 5]


def test_the_periodic_daemon_job_records_a_sample(app, redis_client, settings, tmp_path):
    settings.DOWNLOAD_DIR, settings.UPLOAD_DIR = tmp_path / "download", tmp_path / "upload"
    make_workunits(app, 2, transition_time=NOW - 60)
    run_all_daemons(now=NOW)
    [sample] = queue_history(demo_project())
    assert sample["time"] == NOW
    assert sample["results_ready_to_send"] == 2  # the transitioner made one result per workunit


def test_history_charts_draw_each_queue_over_the_samples():
    samples = [
        {"time": NOW, "results_ready_to_send": 5, "results_in_progress": 1},
        {"time": NOW + 10, "results_ready_to_send": 3, "results_in_progress": 4},
    ]
    figures = dict(queue_history_figures(samples))
    assert list(figures) == ["history-results", "history-workunits", "history-backlog"]
    ready, in_progress = figures["history-results"].data
    assert (ready.name, list(ready.y), list(in_progress.y)) == ("ready to send", [5, 3], [1, 4])
    assert len(ready.x) == 2 and ready.x[1] - ready.x[0] == timedelta(seconds=10)
    # a count the samples lack (an older sample) is drawn as 0, not left out
    assert list(figures["history-backlog"].data[0].y) == [0, 0]


def test_status_page_draws_the_history_and_its_panel_polls(client, app, redis_client):
    assert 'data-testid="no-history"' in client.get("/project/status/").content.decode()
    record_history(NOW, demo_project())
    record_history(NOW + 10, demo_project())
    html = client.get("/project/status/").content.decode()
    for figure_id in ["history-results", "history-workunits", "history-backlog"]:
        assert f'data-figure="{figure_id}"' in html and f'id="{figure_id}"' in html
    fragment = client.get("/project/status/?panel=history", HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert html.lstrip().startswith('<section id="status-history"')
    assert 'hx-trigger="every 10s"' in html and "the last 2 samples" in html
