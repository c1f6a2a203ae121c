"""update_stats: the recent average credit of hosts, users, teams and app versions that earn
nothing decays, as BOINC's update_stats task does (sched/update_stats.cpp, lib/util.cpp
update_average with no work; backend.daemons.update_stats)."""

import pytest
from django.urls import reverse

from backend.daemons import run_pass
from backend.daemons.credit import update_average
from backend.models import AppVersion, Host, Team, UserCredit
from tests.factories import NOW, AppVersionFactory, HostFactory, TeamFactory, UserCreditFactory, demo_project

pytestmark = pytest.mark.django_db
DAY = 86400


def rows(**ages):
    """A user (with credit row and team), their host and an app version whose averages of 100
    were last updated ``ages`` days ago (``user``, ``host``, ``team``, ``version``)."""
    team = TeamFactory(expavg_credit=100, expavg_time=NOW - ages.get("team", 14) * DAY)
    user = UserCreditFactory(team=team, expavg_credit=100, expavg_time=NOW - ages.get("user", 14) * DAY)
    host = HostFactory(owner=user.user, expavg_credit=100, expavg_time=NOW - ages.get("host", 14) * DAY)
    version = AppVersionFactory(version_num=1, expavg_credit=100, expavg_time=NOW - ages.get("version", 14) * DAY)
    return user, host, team, version


def fresh(row):
    row.refresh_from_db()
    return row.expavg_credit, row.expavg_time


def test_two_weeks_without_credit_quarter_every_average():
    user, host, team, version = rows()
    assert run_pass("update_stats", project=demo_project(), now=NOW) == 4
    # two half-lives of 7 days: 100 × 2^-2
    for row in (user, host, team, version):
        assert fresh(row) == (pytest.approx(25.0), NOW)
    assert run_pass("update_stats", project=demo_project(), now=NOW + 3600) == 0  # updated within the day


def test_an_average_updated_within_a_day_is_left_alone():
    user, host, team, version = rows(user=0.9, host=0.5, team=0.99, version=0.1)
    assert run_pass("update_stats", project=demo_project(), now=NOW) == 0
    assert fresh(host) == (100, NOW - 0.5 * DAY)


def test_decaying_in_steps_gives_what_one_step_does():
    _, host, _, _ = rows(host=3)
    for day in range(1, 9):  # one pass a day for 8 days
        run_pass("update_stats", project=demo_project(), now=NOW + day * DAY)
    avg, when = fresh(host)
    # decayed at days 1, 3, 5 and 7: a day after a decay it is not yet older than a day
    # (expavg_time < now - MIN_AGE)
    assert when == NOW + 7 * DAY
    assert avg == pytest.approx(100 * 2 ** (-10 / 7))
    assert avg == pytest.approx(update_average(when, 0, 0, 100, NOW - 3 * DAY)[0])


def test_the_smallest_averages_are_left_as_update_stats_selects_them():
    user, host, team, version = rows()
    UserCredit.objects.update(expavg_credit=0.1)  # users and hosts: above 0.1 only
    Host.objects.update(expavg_credit=0.1)
    AppVersion.objects.update(expavg_credit=0.1)  # app versions: above 0
    Team.objects.update(expavg_credit=0.0, expavg_time=0)  # teams: every one
    assert run_pass("update_stats", project=demo_project(), now=NOW) == 2
    assert fresh(user) == (0.1, NOW - 14 * DAY)
    assert fresh(host) == (0.1, NOW - 14 * DAY)
    assert fresh(version) == (pytest.approx(0.025), NOW)
    # a team never credited keeps 0, its time set to now (update_average with no time)
    assert fresh(team) == (0.0, NOW)


def test_credit_granted_after_a_decay_adds_to_the_decayed_average():
    _, host, _, _ = rows()
    run_pass("update_stats", project=demo_project(), now=NOW)
    avg, when = update_average(NOW + DAY, NOW, 50.0, *fresh(host))
    # 25 decayed for a day, plus the day's 50 credit weighted by 1 - 2^(-1/7)
    weight = 2 ** (-1 / 7)
    assert avg == pytest.approx(25 * weight + (1 - weight) * 50)


def test_the_pages_show_the_decayed_averages(client):
    user, host, team, _ = rows(user=21, host=7, team=28)
    run_pass("update_stats", project=demo_project(), now=NOW)
    page = client.get(reverse("project:user_detail", args=[user.user_id])).content.decode()
    assert "12.50" in page  # 100 × 2^-3
    page = client.get(reverse("project:host_detail", args=[host.pk])).content.decode()
    assert ">50</span>" in page  # 100 × 2^-1, to three significant digits
    page = client.get(reverse("project:team_detail", args=[team.pk])).content.decode()
    assert "6.25" in page  # 100 × 2^-4
    assert "100.00" not in page
