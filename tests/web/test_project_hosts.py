import pytest
from django.test import Client

from backend.models import (
    Host,
    HostFile,
    LifecycleEvent,
    Outcome,
    ServerState,
    UserCredit,
    ValidateState,
)
from tests.factories import NOW, HostFactory, demo_project
from tests.pages import by_testid, parse, texts
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    staff,
    stranger,
    versions,
)

pytestmark = pytest.mark.django_db

PREFS = {
    "work_buf_min_days": "0.5",
    "work_buf_additional_days": "1",
    "max_ncpus_pct": "50",
    "cpu_usage_limit": "100",
    "cpu_scheduling_period_minutes": "60",
}


def test_host_list_pages_by_id(client, owner, django_assert_max_num_queries):
    hosts = [HostFactory(owner=owner, domain_name=f"box-{i:03d}") for i in range(55)]
    with django_assert_max_num_queries(2):
        first = client.get("/project/hosts/")
    links = [f'href="/project/hosts/{hosts[i].pk}/"' for i in (0, 54)]
    assert links[0] in first.content.decode() and links[1] not in first.content.decode()
    second = client.get("/project/hosts/" + first.context["next_url"])
    assert links[1] in second.content.decode()


def test_host_list_queries_do_not_grow_with_hosts_and_owners(client, django_assert_max_num_queries):
    def add(n, start):
        for i in range(start, start + n):  # each host with an owner of its own
            HostFactory(owner__username=f"volunteer-{i}", domain_name=f"box-{i:03d}")

    add(2, 0)
    with django_assert_max_num_queries(2):
        assert client.get("/project/hosts/").status_code == 200
    add(60, 100)
    with django_assert_max_num_queries(2):
        page = client.get("/project/hosts/")
    html = page.content.decode()
    assert "volunteer-147" in html


def test_host_list_rejects_a_bad_cursor(client):
    assert client.get("/project/hosts/?after=zzz").status_code == 400


def test_host_page_shows_results_credit_reliability_and_files(
    client, busy_workunit, host, django_assert_max_num_queries
):
    Host.objects.filter(pk=host.pk).update(total_credit=123.5, avg_turnaround=3600)
    with django_assert_max_num_queries(9):
        page = client.get(f"/project/hosts/{host.id}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert ">124<" in html and ">1 h 00 min<" in html
    assert "sticky_input_1.dat" in html
    assert "wu_00000_0" in html and "Unsent: 1" in html and "Success: 1" in html
    assert "edit preferences" not in html


@pytest.mark.parametrize("htmx", [False, True], ids=["whole", "fragment"])
def test_host_page_queries_do_not_grow_with_results(client, app, host, versions, htmx, django_assert_max_num_queries):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    def add(n, start):
        for wu in make_workunits(app, n, start=start):
            make_results(
                wu, [(ServerState.OVER, Outcome.SUCCESS, ValidateState.VALID)], host=host, app_version=versions[0]
            )
        HostFile.objects.bulk_create(
            HostFile(project=host.project, host=host, name=f"file_{start + i}", reported_time=NOW) for i in range(n)
        )
        LifecycleEvent.objects.bulk_create(
            LifecycleEvent(
                project=host.project,
                time=NOW + start + i,
                actor="owner",
                host=host,
                field="max_ncpus_pct",
                detail="1 → 2",
            )
            for i in range(n)
        )

    add(1, 0)
    budget = 5 if htmx else 9  # the whole page adds the runtime estimates chart
    with django_assert_max_num_queries(budget):
        assert client.get(f"/project/hosts/{host.id}/", **headers).status_code == 200
    add(30, 100)
    with django_assert_max_num_queries(budget):
        page = client.get(f"/project/hosts/{host.id}/", **headers)
    html = page.content.decode()
    assert "wu_00129_0" in html and "Success: 31" in html
    assert html.lstrip().startswith('<div id="host-results"') == htmx


def test_host_page_results_poll_as_a_fragment(client, app, host, django_assert_max_num_queries):
    poll = f'<div id="host-results" hx-get="/project/hosts/{host.id}/" hx-trigger="every 2s" hx-swap="outerHTML">'
    assert poll in client.get(f"/project/hosts/{host.id}/").content.decode()
    [wu] = make_workunits(app, 1)
    make_results(wu, [(ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT)], host=host)
    with django_assert_max_num_queries(5):
        fragment = client.get(f"/project/hosts/{host.id}/", HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert fragment.status_code == 200 and html.lstrip().startswith(poll)
    assert "wu_00000_0" in html and "In progress: 1" in html and "<html" not in html


def test_user_page_shows_hosts_credit_and_results(client, busy_workunit, host, owner, django_assert_max_num_queries):
    Host.objects.filter(pk=host.pk).update(total_credit=10, expavg_credit=2)
    UserCredit.objects.create(project=demo_project(), user=owner, total_credit=10, expavg_credit=2)
    # and the user's credit row, credit by app and credit history
    with django_assert_max_num_queries(8):
        page = client.get(f"/project/users/{owner.id}/")
    html = page.content.decode()
    # an anonymous visitor sees the host by its number, not its domain name (its owner's only)
    assert f"host {host.id}" in html and "owners-box" not in html and ">10<" in html and "wu_00000_1" in html


def test_user_page_queries_do_not_grow_with_hosts_and_results(client, app, owner, django_assert_max_num_queries):
    done = (ServerState.OVER, Outcome.SUCCESS, ValidateState.VALID)

    def add(n, start):
        for i, wu in enumerate(make_workunits(app, n, start=start)):
            box = HostFactory(owner=owner, domain_name=f"box-{start + i}")
            make_results(wu, [done, (ServerState.IN_PROGRESS, 0, 0)], host=box)

    # the results and hosts, and the user's credit row, credit by app and credit history
    queries = 8
    add(1, 0)
    with django_assert_max_num_queries(queries):
        assert client.get(f"/project/users/{owner.id}/").status_code == 200
    add(30, 100)
    with django_assert_max_num_queries(queries):
        page = client.get(f"/project/users/{owner.id}/")
    html = page.content.decode()
    assert "wu_00129_1" in html and "box-129" not in html and "In progress: 31" in html


def test_unknown_host_and_user_are_404(client):
    assert client.get("/project/hosts/4040/").status_code == 404
    assert client.get("/project/users/4040/").status_code == 404
    assert client.get("/project/hosts/4040/prefs/").status_code == 302


# --- preferences: who may edit ---------------------------------------------------------------


def test_prefs_need_a_login(client, host):
    for response in [
        client.get(f"/project/hosts/{host.id}/prefs/"),
        client.post(f"/project/hosts/{host.id}/prefs/", PREFS),
    ]:
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert Host.objects.get(pk=host.pk).max_ncpus_pct == 100


def test_another_user_may_not_see_or_edit_the_prefs(client, host, stranger):
    client.force_login(stranger)
    assert client.get(f"/project/hosts/{host.id}/prefs/").status_code == 403
    assert client.post(f"/project/hosts/{host.id}/prefs/", PREFS).status_code == 403
    assert Host.objects.get(pk=host.pk).max_ncpus_pct == 100


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_owner_and_staff_may_edit_the_prefs(client, host, request, who):
    user = request.getfixturevalue(who)
    client.force_login(user)
    form = client.get(f"/project/hosts/{host.id}/prefs/")
    assert form.status_code == 200 and "csrfmiddlewaretoken" in form.content.decode()
    saved = client.post(f"/project/hosts/{host.id}/prefs/", PREFS, follow=True)
    assert saved.status_code == 200
    # the message names the preferences by the form's labels, not by their column names
    assert (
        "Saved: Use at most (% of the CPUs): 50 (was 100); Store at least (days of work): 0.5 (was 0.1); "
        "Store up to an additional (days of work): 1 (was 0.5)." in saved.content.decode()
    )
    host.refresh_from_db()
    assert (host.work_buf_min_days, host.work_buf_additional_days, host.max_ncpus_pct) == (0.5, 1, 50)
    assert host.prefs_mod_time > NOW
    events = LifecycleEvent.objects.filter(host=host).order_by("field")
    assert [(e.actor, e.field, e.detail, e.old, e.new, e.time) for e in events] == [
        (user.username, "max_ncpus_pct", "100.0 → 50.0", None, None, host.prefs_mod_time),
        (user.username, "work_buf_additional_days", "0.5 → 1.0", None, None, host.prefs_mod_time),
        (user.username, "work_buf_min_days", "0.1 → 0.5", None, None, host.prefs_mod_time),
    ]
    assert all(e.workunit_id is None and e.result_id is None for e in events)
    page = client.get(f"/project/hosts/{host.id}/").content.decode()
    assert f"{user.username}: max_ncpus_pct 100.0 → 50.0" in page and "edit preferences" in page


def test_another_user_may_not_edit_the_prefs_through_htmx_either(client, host, stranger):
    client.force_login(stranger)
    for response in [
        client.get(f"/project/hosts/{host.id}/prefs/", HTTP_HX_REQUEST="true"),
        client.post(f"/project/hosts/{host.id}/prefs/", PREFS, HTTP_HX_REQUEST="true"),
    ]:
        assert response.status_code == 403
    assert Host.objects.get(pk=host.pk).prefs_mod_time == 0


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_prefs_form_needs_the_csrf_token(host, request, who):
    client = Client(enforce_csrf_checks=True)
    client.force_login(request.getfixturevalue(who))
    assert client.post(f"/project/hosts/{host.id}/prefs/", PREFS).status_code == 403
    assert Host.objects.get(pk=host.pk).max_ncpus_pct == 100
    assert not LifecycleEvent.objects.filter(host=host).exists()
    client.get(f"/project/hosts/{host.id}/prefs/")  # the form sets the token's cookie
    token = client.cookies["csrftoken"].value
    saved = client.post(f"/project/hosts/{host.id}/prefs/", {**PREFS, "csrfmiddlewaretoken": token})
    assert saved.status_code == 302
    assert Host.objects.get(pk=host.pk).max_ncpus_pct == 50


def test_prefs_form_queries_do_not_grow_with_the_hosts_rows(client, app, host, owner, django_assert_max_num_queries):
    client.force_login(owner)

    def add(n, start):
        for wu in make_workunits(app, n, start=start):
            make_results(wu, [(ServerState.IN_PROGRESS, 0, 0)], host=host)
        LifecycleEvent.objects.bulk_create(
            LifecycleEvent(
                project=host.project, time=NOW + i, actor="owner", host=host, field="max_ncpus_pct", detail="1 → 2"
            )
            for i in range(n)
        )

    add(1, 0)
    with django_assert_max_num_queries(4):  # session, user, host
        assert client.get(f"/project/hosts/{host.id}/prefs/").status_code == 200
    add(40, 100)
    with django_assert_max_num_queries(4):
        form = client.get(f"/project/hosts/{host.id}/prefs/")
    assert form.status_code == 200
    assert '<form id="prefs-form"' in form.content.decode()


def test_saving_prefs_runs_the_same_queries_for_one_change_or_all(client, host, owner, django_assert_max_num_queries):
    client.force_login(owner)
    one = {
        "work_buf_min_days": "0.1",
        "work_buf_additional_days": "0.5",
        "max_ncpus_pct": "90",
        "cpu_usage_limit": "100",
        "cpu_scheduling_period_minutes": "60",
    }
    with django_assert_max_num_queries(11):
        assert client.post(f"/project/hosts/{host.id}/prefs/", one).status_code == 302
    every = {
        "work_buf_min_days": "1",
        "work_buf_additional_days": "2",
        "max_ncpus_pct": "80",
        "cpu_usage_limit": "70",
        "cpu_scheduling_period_minutes": "30",
        "leave_apps_in_memory": "on",
    }
    with django_assert_max_num_queries(11):
        assert client.post(f"/project/hosts/{host.id}/prefs/", every).status_code == 302
    assert LifecycleEvent.objects.filter(host=host).count() == 7
    with django_assert_max_num_queries(11):  # field errors: no write at all
        bad = client.post(f"/project/hosts/{host.id}/prefs/", {**every, "max_ncpus_pct": "0"})
    assert bad.status_code == 400 and '<form id="prefs-form"' in bad.content.decode()


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_ncpus_pct", "0", "greater than or equal to 1"),
        ("max_ncpus_pct", "101", "less than or equal to 100"),
        ("work_buf_min_days", "-1", "greater than or equal to 0"),
        ("cpu_usage_limit", "lots", "Enter a percentage, a number from 1 to 100."),
        ("cpu_scheduling_period_minutes", "", "required"),
    ],
)
def test_bad_prefs_get_field_errors_and_change_nothing(client, host, owner, field, value, message):
    client.force_login(owner)
    response = client.post(f"/project/hosts/{host.id}/prefs/", {**PREFS, field: value})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert response.context["form"].errors[field]
    host.refresh_from_db()
    assert host.max_ncpus_pct == 100 and host.prefs_mod_time == 0
    assert not LifecycleEvent.objects.filter(host=host).exists()


def test_saving_unchanged_prefs_writes_no_history(client, host, owner):
    client.force_login(owner)
    same = {
        "work_buf_min_days": "0.1",
        "work_buf_additional_days": "0.5",
        "max_ncpus_pct": "100",
        "cpu_usage_limit": "100",
        "cpu_scheduling_period_minutes": "60",
    }
    assert "Nothing changed" in client.post(f"/project/hosts/{host.id}/prefs/", same, follow=True).content.decode()
    assert not LifecycleEvent.objects.filter(host=host).exists()


def test_host_page_lists_preference_changes_newest_first(client, host, owner, django_assert_max_num_queries):
    client.force_login(owner)
    client.post(f"/project/hosts/{host.id}/prefs/", PREFS)
    client.post(f"/project/hosts/{host.id}/prefs/", {**PREFS, "cpu_usage_limit": "75"})
    with django_assert_max_num_queries(11):  # the anonymous page's 8, plus session and user
        html = client.get(f"/project/hosts/{host.id}/").content.decode()
    history = texts(by_testid(parse(html), "prefs-history").find_all("li"))

    def entry(change):
        return next(i for i, text in enumerate(history) if f"{owner.username}: {change}" in text)

    assert entry("cpu_usage_limit 100.0 → 75.0") < entry("max_ncpus_pct 100.0 → 50.0")
    assert "leave_apps_in_memory" not in html  # unchanged preferences have no event


def test_another_hosts_changes_are_not_listed(client, host, owner):
    other = HostFactory(owner=owner, domain_name="other-box")
    client.force_login(owner)
    client.post(f"/project/hosts/{other.id}/prefs/", PREFS)
    html = client.get(f"/project/hosts/{host.id}/").content.decode()
    assert "max_ncpus_pct 100.0" not in html
    assert LifecycleEvent.objects.filter(host=other).count() == 3


def test_the_admin_lists_and_shows_host_events(client, host, owner):
    from django.contrib.auth import get_user_model

    client.force_login(owner)
    client.post(f"/project/hosts/{host.id}/prefs/", PREFS)
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root-1")
    client.force_login(admin)
    listing = client.get("/admin/backend/lifecycleevent/?q=owners-box")
    assert listing.status_code == 200
    assert "100.0 → 50.0" in listing.content.decode()
    event = LifecycleEvent.objects.get(host=host, field="max_ncpus_pct")
    change = client.get(f"/admin/backend/lifecycleevent/{event.pk}/change/")
    assert change.status_code == 200 and "100.0 → 50.0" in change.content.decode()
