"""The host app version rules, each expectation read off BOINC's code: sched_result.cpp
got_good_result / got_bad_result, transitioner.cpp result_timed_out, validator.cpp is_valid /
is_invalid, sched_version.cpp scaled_max_jobs_per_day and lib/average.h AVERAGE::update with
sched/credit.h's HAV_AVG_THRESH 20, HAV_AVG_WEIGHT 0.01, HAV_AVG_LIMIT 10. Where the quota is 0
the limit is left alone, docs/server-fidelity.md departure 6 (BOINC would lower it to 1)."""

from types import SimpleNamespace

import pytest

from backend.daemons import host_app_version as hav_rules
from tests.factories import HostAppVersionFactory

DAY = 86400


def hav(**fields):
    row = dict(max_jobs_per_day=0, n_jobs_today=0, jobs_day=0, turnaround_avg=0.0, turnaround_n=0, consecutive_valid=0)
    row.update(fields)
    return SimpleNamespace(**row)


# --- lib/average.h AVERAGE::update -------------------------------------------------------------


def test_the_first_samples_are_averaged_plainly():
    avg, n = 0.0, 0
    for sample in (10.0, 20.0, 60.0):
        avg, n = hav_rules.running_average(avg, n, sample)
    assert (avg, n) == (pytest.approx(30.0), 3)


def test_from_the_twentieth_sample_each_new_one_weighs_a_hundredth():
    avg, n = hav_rules.running_average(100.0, 18, 200.0)  # the 19th: still the mean
    assert (avg, n) == (pytest.approx(100.0 + 100.0 / 19), 19)
    avg, n = hav_rules.running_average(100.0, 19, 200.0)  # the 20th: weight 0.01
    assert (avg, n) == (pytest.approx(101.0), 20)


def test_a_sample_above_ten_times_the_average_is_cut_to_it():
    assert hav_rules.running_average(10.0, 1, 1000.0) == (pytest.approx(55.0), 2)
    assert hav_rules.running_average(10.0, 1, 100.0) == (pytest.approx(55.0), 2)
    assert hav_rules.running_average(10.0, 1, 99.0) == (pytest.approx(54.5), 2)


def test_a_sample_is_not_cut_while_the_average_is_zero():
    # average.h: the cut applies only when n and avg are both non-zero
    assert hav_rules.running_average(0.0, 1, 100.0) == (pytest.approx(50.0), 2)


def test_a_negative_sample_is_ignored():
    assert hav_rules.running_average(10.0, 3, -1.0) == (10.0, 3)


# --- sched_version.cpp scaled_max_jobs_per_day ---------------------------------------------


@pytest.mark.parametrize(
    "limit, count, multiplier, scaled",
    [
        (1, 8, 0, 1),  # a punished version: never scaled
        (1, 8, 2, 1),
        (2, 8, 0, 16),
        (5, 0, 0, 5),  # no count known: not scaled
        (5, 2, 3, 30),  # GPUs: times the count and the multiplier
        (5, 0, 3, 15),
    ],
)
def test_the_daily_limit_scales_with_the_processors_unless_it_is_one(limit, count, multiplier, scaled):
    row = hav(max_jobs_per_day=limit)
    assert hav_rules.scaled_max_jobs_per_day(row, count, gpu_multiplier=multiplier) == scaled


# --- sched_send.cpp: n_jobs_today counts the jobs of the current UTC day ----------------------


def test_jobs_sent_count_towards_the_day_and_a_new_day_starts_from_zero():
    now = 100 * DAY + 5
    row = hav(n_jobs_today=3, jobs_day=100)
    hav_rules.sent(row, now=now, jobs=2)
    assert (row.n_jobs_today, row.jobs_day) == (5, 100)
    assert hav_rules.jobs_today(row, now) == 5
    assert hav_rules.jobs_today(row, now + DAY) == 0
    hav_rules.sent(row, now=now + DAY, jobs=1)
    assert (row.n_jobs_today, row.jobs_day) == (1, 101)


def test_the_utc_day_changes_at_midnight():
    assert hav_rules.utc_day(100 * DAY - 1) == 99
    assert hav_rules.utc_day(100 * DAY) == 100


# --- sched_result.cpp got_good_result / got_bad_result -----------------------------------------


@pytest.mark.parametrize("before, after", [(10, 20), (300, 500), (500, 500), (600, 600)])
def test_a_success_doubles_the_daily_limit_up_to_the_quota(before, after):
    row = hav(max_jobs_per_day=before)
    hav_rules.got_good_result(row, quota=500, turnaround=None)
    assert row.max_jobs_per_day == after
    assert row.turnaround_n == 0


def test_a_success_takes_its_turnaround_into_the_average():
    row = hav(max_jobs_per_day=500, turnaround_avg=100.0, turnaround_n=1)
    hav_rules.got_good_result(row, quota=500, turnaround=300)
    assert (row.turnaround_avg, row.turnaround_n) == (pytest.approx(200.0), 2)


@pytest.mark.parametrize("before, after", [(10, 9), (700, 499), (2, 1), (1, 1)])
def test_an_error_lowers_the_daily_limit_by_one_from_at_most_the_quota(before, after):
    row = hav(max_jobs_per_day=before, consecutive_valid=7)
    hav_rules.got_bad_result(row, quota=500)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (after, 0)


def test_without_a_quota_an_error_leaves_the_limit_alone():
    row = hav(max_jobs_per_day=10, consecutive_valid=7)
    hav_rules.got_bad_result(row, quota=0)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (10, 0)


# --- transitioner.cpp result_timed_out -------------------------------------------------------


@pytest.mark.parametrize("before, after", [(0, 499), (10, 9), (1, 1), (900, 499)])
def test_a_timeout_lowers_the_limit_and_takes_the_delay_bound_as_turnaround(before, after):
    row = hav(max_jobs_per_day=before, consecutive_valid=3)
    hav_rules.timed_out(row, quota=500, delay_bound=7200)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (after, 0)
    assert (row.turnaround_avg, row.turnaround_n) == (pytest.approx(7200.0), 1)


def test_without_a_quota_a_timeout_leaves_the_limit_alone():
    row = hav(max_jobs_per_day=0)
    hav_rules.timed_out(row, quota=0, delay_bound=7200)
    assert row.max_jobs_per_day == 0


# --- validator.cpp is_valid / is_invalid -------------------------------------------------------


def test_a_valid_result_raises_the_limit_uncapped_and_the_consecutive_valid_count():
    row = hav(max_jobs_per_day=500, consecutive_valid=4)
    hav_rules.is_valid(row, quota=500)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (501, 5)


def test_an_unreplicated_valid_result_leaves_consecutive_valid_alone():
    row = hav(max_jobs_per_day=500, consecutive_valid=4)
    hav_rules.is_valid(row, quota=500, replicated=False)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (501, 4)


def test_without_a_quota_a_valid_result_leaves_the_limit_alone():
    row = hav(max_jobs_per_day=7, consecutive_valid=0)
    hav_rules.is_valid(row, quota=0)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (7, 1)


@pytest.mark.parametrize("before, after", [(501, 500), (500, 500), (10, 10)])
def test_an_invalid_result_takes_back_only_what_valid_ones_added_above_the_quota(before, after):
    row = hav(max_jobs_per_day=before, consecutive_valid=9)
    hav_rules.is_invalid(row, quota=500)
    assert (row.max_jobs_per_day, row.consecutive_valid) == (after, 0)


def test_the_quota_must_be_a_whole_number_of_jobs():
    for bad in (-1, 1.5, True, "500"):
        with pytest.raises(ValueError, match="daily_result_quota"):
            hav_rules.check_quota(bad)
    hav_rules.check_quota(0)


def test_a_sample_of_zero_or_under_one_second_counts():
    # average.h ignores only negative samples
    assert hav_rules.running_average(10.0, 1, 0.0) == (pytest.approx(5.0), 2)
    assert hav_rules.running_average(10.0, 1, 0.5) == (pytest.approx(5.25), 2)


def test_a_request_gives_the_quota_only_to_its_own_hosts_new_records(project):
    # sched_send.cpp update_quota: the requesting host's records at 0 get the quota
    from backend.models import HostAppVersion

    mine, other = project.host(), project.host()
    for host, limit in ((mine, 0), (other, 0)):
        HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=limit)
    hav_rules.start_of_request(mine, quota=500)
    assert dict(HostAppVersion.objects.values_list("host_id", "max_jobs_per_day")) == {mine.pk: 500, other.pk: 0}
    hav_rules.start_of_request(other, quota=0)  # no quota: left at 0
    assert HostAppVersion.objects.get(host=other).max_jobs_per_day == 0
