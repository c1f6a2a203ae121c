"""The users and teams pages, on a database the validator has credited: the credit and
recent average credit (RAC) shown are BOINC's, worked by hand from sched/credit.cpp
grant_credit and lib/util.cpp update_average (half-life 7 days).

Each job is a quorum-1 workunit of 4.32e12 FLOPs whose result ran as long as estimated on a
2 GFLOPS version: CreditNew grants it 4.32e12 x 200 / 86400e9 = 10 credits (twice as long,
20; no host or version scale yet)."""

import math
import re

import pytest
from django.core.cache import cache

from backend.daemons import validator
from backend.models import CreditHistory, Outcome, ServerState, UserAppCredit, UserCredit
from boincweb.human import number
from tests.factories import (
    NOW,
    SUCCESS_FLOPS,
    AppFactory,
    AppVersionFactory,
    FileFactory,
    HostFactory,
    ProjectFactory,
    ResultFactory,
    TeamFactory,
    UserCreditFactory,
    UserFactory,
    WorkunitFactory,
    demo_project,
)
from tests.pages import by_testid, figures, parse, rows, texts

DAY = 86400
EST = 4.32e12
WEIGHT = math.exp(-math.log(2) / 7)  # a day of decay at a 7-day half-life


@pytest.fixture
def credited(db, settings, tmp_path):
    """Two volunteers of one team: ann is credited 10 on day 1 and 20 on day 2 (each job
    sent a day before), bob 10 on day 2, by two validator passes."""
    settings.UPLOAD_DIR = tmp_path / "upload"
    app = AppFactory(name="einstein", max_success_results=1)
    version = AppVersionFactory(app=app)
    team = TeamFactory(name="crunchers")
    users = {}
    for name in ("ann", "bob"):
        user = UserCreditFactory(user__username=name, team=team).user
        users[name] = HostFactory(owner=user, domain_name=f"{name}-box")
    jobs = {NOW: [("ann", 1.0)], NOW + DAY: [("ann", 2.0), ("bob", 1.0)]}
    for now, runs in jobs.items():
        for name, factor in runs:
            wu = WorkunitFactory(
                app=app, name=f"wu{now}{name}", rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, need_validate=True
            )
            r = ResultFactory(
                workunit=wu,
                server_state=ServerState.OVER,
                outcome=Outcome.SUCCESS,
                host=users[name],
                app_version=version,
                sent_time=now - DAY,
                received_time=now - 60,
                elapsed_time=factor * EST / SUCCESS_FLOPS,
            )
            FileFactory(result=r, md5_cksum="a")
        validator.run_once(project=demo_project(), now=now, batch_size=10)
    return team, {name: host.owner for name, host in users.items()}


# ann: 10 over the day since sent; a day on, decayed and 20 more over that day
ANN_RAC = 10 * WEIGHT + (1 - WEIGHT) * 20
# the team: as ann, then bob's 10 at the same instant (update_average's back-to-back limit)
TEAM_RAC = ANN_RAC + math.log(2) * 10 / 7


def test_the_validator_granted_boincs_credit(credited):
    team, users = credited
    ann = UserCredit.objects.get(user=users["ann"])
    assert (ann.total_credit, ann.expavg_credit) == (pytest.approx(30), pytest.approx(ANN_RAC))
    team.refresh_from_db()
    assert (team.total_credit, team.expavg_credit) == (pytest.approx(40), pytest.approx(TEAM_RAC))
    days = list(CreditHistory.objects.filter(kind="team").values_list("day", "total_credit"))
    assert days == [(NOW // DAY, pytest.approx(10)), (NOW // DAY + 1, pytest.approx(40))]


def test_the_user_page_shows_credit_rac_team_and_a_rac_chart(client, credited):
    team, users = credited
    page = parse(client.get(f"/project/users/{users['ann'].pk}/"))
    fields = by_testid(page, "user-credit")
    values = texts(fields.find_all("dd"))
    assert "30" in values and number(ANN_RAC) in values
    assert fields.find("a", href=f"/project/teams/{team.pk}/").get_text() == "crunchers"
    [chart] = figures(page)
    rac = chart["data"][0]
    assert rac["y"] == [pytest.approx(10), pytest.approx(ANN_RAC)]
    assert chart["data"][1]["y"] == [pytest.approx(10), pytest.approx(30)]


def test_the_team_page_shows_its_credit_members_and_rac_chart(client, credited):
    team, users = credited
    page = parse(client.get(f"/project/teams/{team.pk}/"))
    values = texts(by_testid(page, "team-credit").find_all("dd"))
    assert "40" in values and number(TEAM_RAC) in values
    members = [row[0] for row in rows(by_testid(page, "team-members"))]
    assert members.index("ann") < members.index("bob")  # by RAC
    [chart] = figures(page)
    assert chart["data"][0]["y"] == [pytest.approx(10), pytest.approx(TEAM_RAC)]


def test_the_users_and_teams_lists_rank_by_rac(client, credited):
    team, users = credited
    page = parse(client.get("/project/users/"))
    names = texts(page.find_all("a", href=re.compile(r"^/project/users/\d+/$")))
    assert names == ["ann", "bob"]
    bob_rac = 10 * (1 - WEIGHT) / (1 - WEIGHT)  # 10 over the day since sent
    by_name = {row[1]: row for row in rows(page.find("table"))}
    assert by_name["ann"][-2:] == [number(ANN_RAC), "30"]
    assert by_name["bob"][-2:] == [number(bob_rac), "10"]
    page = parse(client.get("/project/teams/"))
    assert page.find("a", href=f"/project/teams/{team.pk}/").get_text() == "crunchers"
    [crunchers] = rows(page.find("table"))
    assert crunchers[1:] == ["crunchers", "2", number(TEAM_RAC), "40"]


def test_the_status_page_takes_rac_and_speed_from_the_users(client, credited, redis_client):
    cache.clear()  # the community figures an earlier test cached (server_status.COMMUNITY_TTL)
    data = client.get("/project/status.json").json()["community"]
    assert data["users_with_credit"] == 2
    assert data["current_floating_point_speed"] == round((ANN_RAC + 10) / 200, 2)


@pytest.mark.parametrize(
    "path", ["/project/users/?page=9", "/project/users/?page=x", "/project/teams/999/", "/project/teams/?page=0"]
)
def test_a_missing_page_or_team_is_a_404(client, credited, path):
    assert client.get(path).status_code == 404


def test_a_user_without_credit_has_a_page_without_chart(client, db):
    user = HostFactory(owner__username="new").owner
    page = parse(client.get(f"/project/users/{user.pk}/"))
    assert "0" in texts(page.find_all("dd")) and "user-rac-chart" not in str(page)


def test_a_user_with_nothing_in_the_project_is_a_404_there(client, db):
    other = ProjectFactory()
    user = HostFactory(project=other, owner__username="elsewhere").owner
    assert client.get(f"/projects/{other.slug}/users/{user.pk}/").status_code == 200
    assert client.get(f"/project/users/{user.pk}/").status_code == 404
    assert client.get(f"/projects/demo/users/{UserFactory().pk}/").status_code == 404


def grant_one_job(project, owner, *, team, factor, credit_by_app=False):
    """One quorum-1 job of ``owner``'s host in ``project``, run ``factor`` times its estimate
    (10 credits a factor), validated there by a pass of ``project``'s validator."""
    app = AppFactory(project=project, name=f"{project.slug}_app", max_success_results=1)
    version = AppVersionFactory(app=app)
    host = HostFactory(project=project, owner=owner, domain_name=f"{project.slug}-box")
    if team is not None:
        UserCreditFactory(project=project, user=owner, team=team)
    wu = WorkunitFactory(
        app=app, name=f"{project.slug}_wu", rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, need_validate=True
    )
    result = ResultFactory(
        workunit=wu,
        host=host,
        app_version=version,
        reported=True,
        sent_time=NOW - DAY,
        elapsed_time=factor * EST / SUCCESS_FLOPS,
    )
    FileFactory(result=result, md5_cksum="a")
    validator.run_once(project=project, now=NOW, batch_size=10, credit_by_app=credit_by_app)


def test_a_volunteer_of_two_projects_has_credit_and_a_team_in_each(client, db, settings, tmp_path):
    """BOINC's user row is each project's own: one volunteer credited in two projects has two
    credit rows, each with its project's credit and team, and each project's pages show only
    their own figure."""
    settings.UPLOAD_DIR = tmp_path / "upload"
    demo, other = demo_project(), ProjectFactory(slug="other")
    ann = UserFactory(username="ann")
    demo_team, other_team = TeamFactory(project=demo, name="crunchers"), TeamFactory(project=other, name="others")
    grant_one_job(demo, ann, team=demo_team, factor=1.0, credit_by_app=True)
    grant_one_job(other, ann, team=other_team, factor=3.0, credit_by_app=True)

    rows_by_project = {c.project_id: c for c in UserCredit.objects.filter(user=ann)}
    assert set(rows_by_project) == {demo.pk, other.pk}
    assert rows_by_project[demo.pk].total_credit == pytest.approx(10)
    assert rows_by_project[other.pk].total_credit == pytest.approx(30)
    assert (rows_by_project[demo.pk].team, rows_by_project[other.pk].team) == (demo_team, other_team)
    demo_team.refresh_from_db()
    other_team.refresh_from_db()
    assert (demo_team.total_credit, other_team.total_credit) == (pytest.approx(10), pytest.approx(30))
    history = CreditHistory.objects.filter(kind="user", owner_id=ann.pk)
    assert sorted(history.values_list("project__slug", "total_credit")) == [
        ("demo", pytest.approx(10)),
        ("other", pytest.approx(30)),
    ]
    assert sorted(UserAppCredit.objects.filter(user=ann).values_list("app__name", "total")) == [
        ("demo_app", pytest.approx(10)),
        ("other_app", pytest.approx(30)),
    ]

    for slug, total, wrong, team in (("demo", "10", "30", "crunchers"), ("other", "30", "10", "others")):
        listed = {row[1]: row for row in rows(parse(client.get(f"/projects/{slug}/users/")).find("table"))}
        assert listed["ann"][-1] == total and listed["ann"][2] == team
        page = parse(client.get(f"/projects/{slug}/users/{ann.pk}/"))
        values = texts(by_testid(page, "user-credit").find_all("dd"))
        assert total in values and wrong not in values and team in values
        [chart] = figures(page)
        assert chart["data"][1]["y"] == [pytest.approx(float(total))]
        by_app = rows(by_testid(page, "user-credit-by-app"))
        assert [row[0] for row in by_app] == [f"{slug}_app"]
        teams = rows(parse(client.get(f"/projects/{slug}/teams/")).find("table"))
        assert [row[1:3] for row in teams] == [[team, "1"]]
