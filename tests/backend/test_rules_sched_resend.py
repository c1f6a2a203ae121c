"""A resent lost result's deadline, worked out from BOINC's sched_check.cpp
(get_delay_bound_range, check_deadline: ``estimated_delay + duration > delay_bound`` fails, and
an empty queue skips the check) and sched_resend.cpp possibly_give_result_new_deadline (now +
half the time the result was given, at least the stored deadline, at most now + the delay
bound, and room for the job's duration)."""

from types import SimpleNamespace

import pytest

from backend.daemons.sched_resend import new_deadline, not_resendable
from backend.daemons.scheduler import SchedulerConfig, handle_request
from backend.models import ServerState
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, HostAppVersionFactory, demo_project


def lost(stored, sent, delay_bound):
    return SimpleNamespace(report_deadline=stored, sent_time=sent, workunit=SimpleNamespace(delay_bound=delay_bound))


def cpu(delay=0.0, frac=1.0):
    return SimpleNamespace(estimated_delay=delay, available_frac=frac)


@pytest.mark.parametrize(
    "job, resource, runtime, deadline",
    [
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
    ],
)
def test_a_resent_lost_result_keeps_a_deadline_it_can_meet(job, resource, runtime, deadline):
    assert new_deadline(job, resource, runtime, now=NOW) == deadline


def test_a_deadline_is_moved_to_half_the_given_time_when_that_is_later():
    # sent at NOW - 1,000 with a stored deadline at NOW + 100: the time left is 99 s; with a
    # queue, the check against the delay bound (50,000) lets now + half of 1,100 be the cap
    job = lost(NOW + 100, NOW - 1_000, 50_000)
    assert new_deadline(job, cpu(delay=60), 200, now=NOW) == NOW + 550


@pytest.mark.parametrize(
    "error_mask, canonical, version, why",
    [
        (0, None, object(), ""),
        (1, None, object(), "error"),
        (0, 7, object(), "canonical"),
        (0, None, None, "no app version"),
    ],
)
def test_a_lost_result_is_expired_when_its_workunit_is_done_or_no_version_runs_it(error_mask, canonical, version, why):
    job = SimpleNamespace(workunit=SimpleNamespace(error_mask=error_mask, canonical_result_id=canonical))
    reason = not_resendable(job, version)
    assert (reason == "") if not why else (why in reason)


# --- the whole resend path: what the host lacks, and the committed version's speed ---------

DAY = 86400
GB = 1024.0**3


def lost_job(project, host, *, stored=None, **wu_fields):
    """An IN_PROGRESS result of ``host`` that the host no longer lists."""
    wu = project.workunit(delay_bound=10 * DAY, **wu_fields)
    return project.result(
        wu,
        server_state=ServerState.IN_PROGRESS,
        host=host,
        user_id=host.owner_id,
        app_version=project.version,
        sent_time=NOW - 1000,
        report_deadline=NOW + 9 * DAY if stored is None else stored,
    )


def resend_request(host, **fields):
    fields.setdefault("cpu_req_secs", 86400.0)
    fields.setdefault("work_req_seconds", fields["cpu_req_secs"])
    return work_request(host, other_results=[], **fields)


# the version choice without its random factor (docs/server-fidelity.md departure 12)
RESEND = SchedulerConfig(resend_lost_results=True, version_select_random_factor=0.0)


def test_a_lost_result_the_host_lacks_disk_for_is_expired_and_the_host_told(project):
    # sched_resend.cpp runs wu_is_infeasible_fast, whose check_disk refuses the job and adds
    # its notice; nothing is resent, so send_work runs and, sending nothing, gives it
    host = project.host()
    job = lost_job(project, host, rsc_disk_bound=2e9)
    request = resend_request(host)
    request.host_info.d_total, request.host_info.d_free = 1e12, GB + 5e8
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        (f"Didn't resend lost task {job.name} (expired)", "low"),
        ("No tasks sent", "low"),
        (
            "uppercase needs 1430.51MB more disk space.  You currently have 476.84 MB available "
            "and it needs 1907.35 MB.",
            "notice",
        ),
    ]
    job.refresh_from_db()
    assert job.report_deadline == NOW - 1


@pytest.mark.parametrize(
    "m_nbytes, n_bwdown, resent",
    [
        (1e9, 0.0, False),  # check_memory: 2e9 needed
        (4e9, 1e5, False),  # check_bandwidth: 2e5 B/s needed
        (4e9, 2e5, True),
        (4e9, 0.0, True),  # never measured: no bandwidth check
    ],
)
def test_a_lost_result_is_resent_only_to_a_host_with_the_memory_and_bandwidth_it_needs(
    project, m_nbytes, n_bwdown, resent
):
    host = project.host()
    job = lost_job(project, host, rsc_memory_bound=2e9, rsc_bandwidth_bound=2e5)
    request = resend_request(host)
    request.host_info.m_nbytes, request.host_info.n_bwdown = m_nbytes, n_bwdown
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert [r.name for r in reply.results] == ([job.name] if resent else [])
    assert any(m.text == f"Didn't resend lost task {job.name} (expired)" for m in reply.messages) is not resent


def test_a_resent_job_takes_its_disk_off_what_the_next_may_use(project):
    # add_result_to_reply takes each resent job's rsc_disk_bound off disk_available
    host = project.host()
    first = lost_job(project, host, rsc_disk_bound=1e9)
    second = lost_job(project, host, rsc_disk_bound=1e9)
    request = resend_request(host, cpu_req_secs=10 * DAY)
    request.host_info.d_total, request.host_info.d_free = 1e12, GB + 1.5e9
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert [r.name for r in reply.results] == [first.name]
    second.refresh_from_db()
    assert second.report_deadline == NOW - 1


@pytest.fixture
def committed(project):
    """A homogeneous-app-version project whose workunits are committed to its CPU version."""
    project.app.homogeneous_app_version = True
    project.app.save()
    return project


@pytest.mark.parametrize(
    "stored, resent",
    [
        # 3.63e13 FLOPs at the capped 1.1 x 3.3 GFLOPS (under 10 hosts): 10,000 s; at the host's
        # own 1e10: 3,630 s. The time left before the stored deadline (NOW + 5,000 - 1) holds the
        # second, not the first
        (NOW + 5_000, False),
        (NOW + 20_000, True),
    ],
)
def test_a_lost_committed_job_runs_at_the_capped_host_speed_as_a_new_send_does(committed, stored, resent):
    host = committed.host(p_fpops=1e10)
    job = lost_job(committed, host, stored=stored, rsc_fpops_est=3.63e13, app_version=committed.version)
    reply = handle_request(resend_request(host), project=demo_project(), now=NOW, config=RESEND)
    assert [r.name for r in reply.results] == ([job.name] if resent else [])
    if resent:
        assert reply.results[0].estimated_runtime == pytest.approx(10_000.0)
        job.refresh_from_db()
        assert job.flops_estimate == pytest.approx(3.63e9)


@pytest.mark.parametrize(
    "quota_used_up, platform",
    [
        # both versions run at the host's speed: the first platform's wins the tie
        (False, "x86_64-pc-linux-gnu"),
        # get_app_version skips a version whose daily quota is used up, and takes the next best
        (True, "i686-pc-linux-gnu"),
    ],
)
def test_a_lost_result_is_resent_with_the_version_a_new_send_would_take(project, quota_used_up, platform):

    host = project.host()
    AppVersionFactory(app=project.app, version_num=90, platform="i686-pc-linux-gnu", flops=1e9)
    if quota_used_up:
        HostAppVersionFactory(
            host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // DAY
        )
    job = lost_job(project, host)
    request = resend_request(host, alt_platforms=["i686-pc-linux-gnu"])
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert [(r.name, r.app_version.platform) for r in reply.results] == [(job.name, platform)]


def test_a_lost_result_refused_for_its_deadline_tells_the_host_it_is_too_slow(project):
    # sched_resend.cpp runs wu_is_infeasible_fast, whose check_deadline flags
    # speed.insufficient; nothing is resent, send_work sends nothing, and send_user_messages
    # says so. The job has 10,000 s left and a 10-day delay bound; the host a queue of
    # 900,000 s
    host = project.host(on_frac=0.5, active_frac=1.0)
    job = lost_job(project, host, rsc_fpops_est=3.6e12, stored=NOW + 10_000)
    request = resend_request(host, estimated_delay=900_000.0, core_client_version="")
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        (f"Didn't resend lost task {job.name} (expired)", "low"),
        ("No tasks sent", "low"),
        ("Tasks won't finish in time: Computer available 50.0% of the time", "low"),
    ]
    # expired, as a lost result that cannot finish in time is
    job.refresh_from_db()
    assert job.report_deadline == NOW - 1


def test_a_lost_result_committed_to_another_class_says_tasks_are_committed_elsewhere(project):
    # sched_resend.cpp's wu_is_infeasible_fast checks the lost result's homogeneous
    # redundancy class, which sets hr_reject_temp; with nothing else to check, a reply that
    # sends nothing says so (the differential's seed 9303 locality cases 163 and 208)
    import dataclasses

    project.app.homogeneous_redundancy = 1
    project.app.save()
    host = project.host()
    job = lost_job(project, host, hr_class=256 + 21, stored=NOW + 86400)
    request = resend_request(host)
    request.host_info = dataclasses.replace(
        request.host_info, os_name="Linux", p_vendor="GenuineIntel", p_model="Intel(R) Xeon(R) CPU E5-2670"
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=RESEND)
    assert reply.results == []
    # (its expiry commits the workunit to no class, so BOINC leaves its message out)
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Tasks are committed to other platforms", "low"),
    ]
    job.refresh_from_db()
    assert job.report_deadline == NOW - 1
