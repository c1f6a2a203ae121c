"""A resent lost result's deadline, worked out from BOINC's sched_check.cpp
(get_delay_bound_range, check_deadline: ``estimated_delay + duration > delay_bound`` fails, and
an empty queue skips the check) and sched_resend.cpp possibly_give_result_new_deadline (now +
half the time the result was given, at least the stored deadline, at most now + the delay
bound, and room for the job's duration)."""

from types import SimpleNamespace

import pytest

from backend.daemons.sched_resend import new_deadline, not_resendable

NOW = 1_000_000


def lost(stored, sent, delay_bound):
    return SimpleNamespace(report_deadline=stored, sent_time=sent,
                           workunit=SimpleNamespace(delay_bound=delay_bound))


def cpu(delay=0.0, frac=1.0):
    return SimpleNamespace(estimated_delay=delay, available_frac=frac)


@pytest.mark.parametrize("job, resource, runtime, deadline", [
    # the time left is 10,000 s, truncated to 9,999 (BOINC's dtime()); half the given time
    # (10,000) is not later than the stored deadline; capped at now + 9,999
    (lost(NOW + 10_000, NOW - 10_000, 20_000), cpu(), 100, NOW + 9_999),
    # a queue that does not fit in the time left passes against the delay bound instead
    (lost(NOW + 10_000, NOW - 10_000, 20_000), cpu(delay=5_000), 5_000, NOW + 10_000),
    # nor in the delay bound: expired
    (lost(NOW + 10_000, NOW - 10_000, 20_000), cpu(delay=15_000), 6_000, None),
    # a queue that fits the time left exactly is fine (the check is strict)
    (lost(NOW + 10_000, NOW - 10_000, 20_000), cpu(delay=4_999), 5_000, NOW + 9_999),
    # the stored deadline has passed: no time left
    (lost(NOW - 5, NOW - 10_000, 20_000), cpu(), 1, None),
    (lost(NOW, NOW - 10_000, 20_000), cpu(), 1, None),
    # given long ago: half of it is later than now + the time left, which caps it
    (lost(NOW + 1_000, NOW - 100_000, 200_000), cpu(), 999, NOW + 999),
    (lost(NOW + 1_000, NOW - 100_000, 200_000), cpu(), 1_000, None),
    # the duration is the runtime stretched by the host's availability
    (lost(NOW + 1_000, NOW - 100_000, 200_000), cpu(frac=0.5), 500, None),
    (lost(NOW + 1_000, NOW - 100_000, 200_000), cpu(frac=0.5), 499, NOW + 999),
])
def test_a_resent_lost_result_keeps_a_deadline_it_can_meet(job, resource, runtime, deadline):
    assert new_deadline(job, resource, runtime, now=NOW) == deadline


def test_a_deadline_is_moved_to_half_the_given_time_when_that_is_later():
    # sent at NOW - 1,000 with a stored deadline at NOW + 100: the time left is 99 s; with a
    # queue, the check against the delay bound (50,000) lets now + half of 1,100 be the cap
    job = lost(NOW + 100, NOW - 1_000, 50_000)
    assert new_deadline(job, cpu(delay=60), 200, now=NOW) == NOW + 550


@pytest.mark.parametrize("error_mask, canonical, version, why", [
    (0, None, object(), ""),
    (1, None, object(), "error"),
    (0, 7, object(), "canonical"),
    (0, None, None, "no app version"),
])
def test_a_lost_result_is_expired_when_its_workunit_is_done_or_no_version_runs_it(
        error_mask, canonical, version, why):
    job = SimpleNamespace(workunit=SimpleNamespace(error_mask=error_mask,
                                                   canonical_result_id=canonical))
    reason = not_resendable(job, version)
    assert (reason == "") if not why else (why in reason)
