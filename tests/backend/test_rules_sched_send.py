"""The scheduler's arithmetic of sending, each expectation read off BOINC's sched/sched_send.cpp
(clamp_frac, get_mem_sizes, max_allowable_disk, get_job_limits, add_result_to_reply /
update_estimated_delay, estimate_duration) and sched_check.cpp (check_memory, check_disk,
check_bandwidth, check_deadline), and the server side of sched_version.cpp's daily quota
(daily_quota_exceeded, scaled_max_jobs_per_day)."""

from types import SimpleNamespace

import pytest

from backend.daemons.sched_send import (
    BANDWIDTH,
    CPU,
    DEADLINE,
    DISK,
    MEMORY,
    DiskSpace,
    Resource,
    Version,
    after_sending,
    apply_daily_quota,
    clamp_frac,
    host_resources,
    infeasible,
    job_flops,
    max_allowable_disk,
    max_jobs_per_rpc,
    notice,
    requested_resources,
    usable_ram,
)
from backend.daemons.sched_types import (
    GlobalPrefs,
    GpuRequest,
    HostInfo,
    ReplyAppVersion,
    SchedulerConfig,
    SchedulerRequest,
    TimeStats,
)
from backend.daemons.scheduler import handle_request
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, HostAppVersionFactory, demo_project

DAY = 86400


def resource(
    name=CPU,
    req_secs=1000.0,
    req_instances=0.0,
    delay=0.0,
    flops=1e9,
    frac=1.0,
    count=1,
    ram=None,
    disk=None,
    bwdown=0.0,
):
    return Resource(
        name, req_secs, req_instances, delay, flops, frac, count, ram, None if disk is None else DiskSpace(disk), bwdown
    )


def job(rsc_memory_bound=0.0, rsc_disk_bound=0.0, rsc_bandwidth_bound=0.0, delay_bound=DAY):
    return SimpleNamespace(
        rsc_memory_bound=rsc_memory_bound,
        rsc_disk_bound=rsc_disk_bound,
        rsc_bandwidth_bound=rsc_bandwidth_bound,
        delay_bound=delay_bound,
    )


def version(instances=1.0, flops=0.0, row=None):
    return Version(row, ReplyAppVersion("app", 100, "x86_64-pc-linux-gnu", flops=flops), instances)


@pytest.mark.parametrize("frac, clamped", [(0.02, 0.1), (0.1, 0.1), (0.5, 0.5), (1.0, 1.0), (1.7, 1.0), (-1.0, 0.1)])
def test_an_availability_is_held_between_a_tenth_and_one(frac, clamped):
    assert clamp_frac(frac) == clamped


@pytest.mark.parametrize("m_nbytes, ram", [(2e9, 2e9), (0, 64e6), (-5, 64e6), (None, None)])
def test_a_host_that_gives_no_ram_is_taken_to_have_64_mb(m_nbytes, ram):
    request = SchedulerRequest(host_info=HostInfo(m_nbytes=m_nbytes))
    assert usable_ram(request) == ram


@pytest.mark.parametrize(
    "busy, idle, ram",
    [
        (0.5, 0.9, 0.9 * 4e9),  # the larger of the two fractions
        (0.9, 0.5, 0.9 * 4e9),
        (0.5, 0.0, 4e9),  # both must be set
        (0.0, 0.5, 4e9),
        (1.5, 0.5, 4e9),  # at most all of it
    ],
)
def test_the_ram_preferences_let_a_job_use_the_larger_of_the_busy_and_idle_shares(busy, idle, ram):
    # sched_send.cpp get_mem_sizes: ram_max_used_busy_frac and ram_max_used_idle_frac
    request = SchedulerRequest(
        host_info=HostInfo(m_nbytes=4e9),
        global_prefs=GlobalPrefs(ram_max_used_busy_frac=busy, ram_max_used_idle_frac=idle),
    )
    assert usable_ram(request) == pytest.approx(ram)


@pytest.mark.parametrize(
    "ncpus, gpus, max_wus, multiplier, jobs",
    [
        (4, [], 10, 0, 40),
        (0, [], 10, 0, 10),  # at least one CPU
        (200, [], 10, 0, 640),  # at most max_ncpus (64)
        (4, [2, 1], 10, 0, 40),  # GPUs add nothing with gpu_multiplier 0
        (4, [2, 1], 10, 2, 100),  # 10 x (4 + 2 x 3)
        (4, [2, 0], 3, 1, 18),  # a GPU type with no device counts 0
        (4, [], 0, 0, 999999),  # max_wus_to_send 0: no limit
    ],
)
def test_the_jobs_per_request(ncpus, gpus, max_wus, multiplier, jobs):
    host = SimpleNamespace(p_ncpus=ncpus)
    request = SimpleNamespace(gpu_requests=[SimpleNamespace(count=n) for n in gpus])
    config = SchedulerConfig(max_wus_to_send=max_wus, gpu_multiplier=multiplier)
    assert max_jobs_per_rpc(host, request, config) == jobs


def test_the_queue_and_the_request_change_by_each_job_sent():
    # a 3,600 s job on a host available half the time takes 7,200 s; it uses 2 of 4 CPUs
    before = resource(req_secs=20_000.0, req_instances=3.0, delay=100.0, frac=0.5, count=4)
    sent = [(None, version(instances=2.0), 3600.0), (None, version(instances=2.0), 3600.0)]
    after = after_sending(before, sent)
    assert after.req_secs == pytest.approx(20_000 - 2 * 7200 * 2)
    assert after.req_instances == pytest.approx(3.0 - 4.0)
    assert after.estimated_delay == pytest.approx(100 + 2 * 7200 * 2 / 4)
    assert (before.req_secs, before.estimated_delay) == (20_000.0, 100.0)  # a new value


def test_a_resource_with_no_count_queues_as_one_instance():
    after = after_sending(resource(delay=0.0, count=0), [(None, version(), 500.0)])
    assert after.estimated_delay == pytest.approx(500.0)


@pytest.mark.parametrize(
    "wu, res, runtime, why",
    [
        # check_memory: the bound above the usable RAM, strictly
        (dict(rsc_memory_bound=3e9, delay_bound=DAY), dict(ram=2e9), 10, MEMORY),
        (dict(rsc_memory_bound=2e9, delay_bound=DAY), dict(ram=2e9), 10, ""),
        (dict(rsc_memory_bound=3e9, delay_bound=DAY), dict(ram=None), 10, ""),
        # check_deadline: an empty queue skips it
        (dict(rsc_memory_bound=0, delay_bound=100), dict(delay=0.0), 1000, ""),
        # queue + runtime / available fraction > delay_bound, strictly
        (dict(rsc_memory_bound=0, delay_bound=100), dict(delay=50.0), 50, ""),
        (dict(rsc_memory_bound=0, delay_bound=100), dict(delay=50.0), 51, DEADLINE),
        (dict(rsc_memory_bound=0, delay_bound=100), dict(delay=50.0, frac=0.5), 25, ""),
        (dict(rsc_memory_bound=0, delay_bound=100), dict(delay=50.0, frac=0.5), 26, DEADLINE),
    ],
)
def test_a_job_is_refused_for_memory_then_for_its_deadline(wu, res, runtime, why):
    config = SchedulerConfig()
    assert infeasible(job(**wu), resource(**res), runtime, config) == why


def test_ignore_delay_bound_skips_the_deadline_check_but_not_memory():
    config = SchedulerConfig(ignore_delay_bound=True)
    late = job(rsc_memory_bound=0, delay_bound=100)
    assert infeasible(late, resource(delay=50.0), 1000, config) == ""
    big = job(rsc_memory_bound=3e9, delay_bound=100)
    assert infeasible(big, resource(ram=2e9), 1, config) == MEMORY


GB = 1024.0**3  # lib/util.h GIGA


def disk_request(d_total=1000 * GB, d_free=100 * GB, used=0.0, max_gb=0.0, max_pct=0.0, min_free=0.0):
    return SchedulerRequest(
        host_info=HostInfo(d_total=d_total, d_free=d_free, d_boinc_used_total=used),
        global_prefs=GlobalPrefs(disk_max_used_gb=max_gb, disk_max_used_pct=max_pct, disk_min_free_gb=min_free),
    )


@pytest.mark.parametrize(
    "figures, project_min_free, allowed",
    [
        # without BOINC's own use only the free space counts, less the least free space: the
        # preferences' or the project's default_disk_min_free_gb, whichever is more
        (dict(), 1.0, 99 * GB),
        (dict(min_free=5.0), 1.0, 95 * GB),
        (dict(min_free=0.5), 1.0, 99 * GB),
        (dict(min_free=0.5), 0.0, 99.5 * GB),
        (dict(max_gb=10.0, max_pct=1.0), 1.0, 99 * GB),  # no use reported: the caps do not count
        # with BOINC's use: the least of free - min free, pct of the disk - use, max GB - use
        (dict(used=2 * GB), 1.0, 99 * GB),
        (dict(used=2 * GB, max_gb=10.0), 1.0, 8 * GB),
        (dict(used=2 * GB, max_pct=5.0), 1.0, 48 * GB),
        (dict(used=2 * GB, max_pct=5.0, max_gb=30.0), 1.0, 28 * GB),
        (dict(used=2 * GB, max_pct=5.0, max_gb=30.0, min_free=90.0), 1.0, 10 * GB),
        # never below 0; a real client that reports no free disk may fill none
        (dict(used=20 * GB, max_gb=10.0), 1.0, 0.0),
        (dict(d_free=0.0), 1.0, 0.0),
        (dict(d_total=0.0, d_free=0.0), 0.0, 0.0),
    ],
)
def test_the_disk_a_request_may_fill(figures, project_min_free, allowed):
    # sched_send.cpp max_allowable_disk
    config = SchedulerConfig(default_disk_min_free_gb=project_min_free)
    assert max_allowable_disk(disk_request(**figures), config) == pytest.approx(allowed)


def test_a_caller_that_does_not_model_disk_has_no_disk_limit():
    request = SchedulerRequest(host_info=HostInfo())
    assert max_allowable_disk(request, SchedulerConfig()) is None
    [cpu] = host_resources(SimpleNamespace(p_fpops=1e9, p_ncpus=1), request, SchedulerConfig())
    assert cpu.disk is None
    assert infeasible(job(rsc_disk_bound=1e15), cpu, 1.0, SchedulerConfig()) == ""


def test_every_resource_of_a_request_draws_on_one_disk_allowance():
    request = disk_request(d_free=11 * GB)
    request.gpu_requests = [GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=10.0)]
    gpu, cpu = host_resources(SimpleNamespace(p_fpops=1e9, p_ncpus=1), request, SchedulerConfig())
    assert gpu.disk is cpu.disk and cpu.disk.available == pytest.approx(10 * GB)
    gpu.disk.take(job(rsc_disk_bound=4 * GB))
    assert cpu.disk.available == pytest.approx(6 * GB)


@pytest.mark.parametrize(
    "wu, res, why",
    [
        # check_disk: the bound above the disk left, strictly
        (dict(rsc_disk_bound=2e9), dict(disk=1e9), DISK),
        (dict(rsc_disk_bound=1e9), dict(disk=1e9), ""),
        (dict(rsc_disk_bound=1.0), dict(disk=0.0), DISK),
        # check_bandwidth: a bound above the measured speed, strictly; no bound or no
        # measurement (the host never downloaded anything) skips it
        (dict(rsc_bandwidth_bound=2e5), dict(bwdown=1e5), BANDWIDTH),
        (dict(rsc_bandwidth_bound=1e5), dict(bwdown=1e5), ""),
        (dict(rsc_bandwidth_bound=0.0), dict(bwdown=1e5), ""),
        (dict(rsc_bandwidth_bound=2e5), dict(bwdown=0.0), ""),
        # memory, then disk, then bandwidth, then the deadline
        (
            dict(rsc_memory_bound=3e9, rsc_disk_bound=2e9, rsc_bandwidth_bound=2e5),
            dict(ram=2e9, disk=1e9, bwdown=1e5),
            MEMORY,
        ),
        (dict(rsc_disk_bound=2e9, rsc_bandwidth_bound=2e5), dict(disk=1e9, bwdown=1e5), DISK),
        (dict(rsc_bandwidth_bound=2e5, delay_bound=10), dict(bwdown=1e5, delay=50.0), BANDWIDTH),
        (
            dict(rsc_disk_bound=1e9, rsc_bandwidth_bound=1e5, delay_bound=10),
            dict(disk=1e9, bwdown=1e5, delay=50.0),
            DEADLINE,
        ),
    ],
)
def test_a_job_is_refused_for_disk_and_bandwidth_after_memory_and_before_its_deadline(wu, res, why):
    assert infeasible(job(**wu), resource(**res), 1.0, SchedulerConfig()) == why


def test_the_deadline_takes_no_time_for_downloading_the_inputs():
    # estimate_duration: rsc_fpops_est / FLOPS / available fraction, nothing for the download
    slow_link = resource(delay=50.0, bwdown=1.0)
    assert infeasible(job(delay_bound=100), slow_link, 50.0, SchedulerConfig()) == ""


@pytest.mark.parametrize(
    "why, wu, res, text",
    [
        (
            MEMORY,
            dict(rsc_memory_bound=3 * 2**20),
            dict(ram=2 * 2**20),
            "app needs 3.00 MB RAM but only 2.00 MB is available for use.",
        ),
        (
            DISK,
            dict(rsc_disk_bound=1.5 * 2**20),
            dict(disk=0.25 * 2**20),
            "app needs 1.25MB more disk space.  You currently have 0.25 MB available and it needs 1.50 MB.",
        ),
        (
            BANDWIDTH,
            dict(rsc_bandwidth_bound=2048.0),
            dict(bwdown=512.0),
            "app requires 2.00 KB/sec download bandwidth.  Your computer has been measured at 0.50 KB/sec.",
        ),
        (DEADLINE, dict(), dict(), ""),
    ],
)
def test_the_notices_for_memory_disk_and_bandwidth(why, wu, res, text):
    # sched_check.cpp check_memory, check_disk, check_bandwidth; MEGA 2^20, KILO 2^10
    assert notice(why, job(**wu), version(), resource(**res)) == text


def test_the_request_parser_reads_disk_use_download_speed_and_preferences():
    from protocol.xml_request import parse_request

    body = b"""<scheduler_request><authenticator>a</authenticator>
<working_global_preferences><global_preferences><disk_max_used_gb>7</disk_max_used_gb>
</global_preferences></working_global_preferences>
<global_preferences><disk_max_used_gb>100</disk_max_used_gb>
<disk_max_used_pct>50</disk_max_used_pct><disk_min_free_gb>2</disk_min_free_gb>
<ram_max_used_busy_pct>50</ram_max_used_busy_pct>
<ram_max_used_idle_pct>90</ram_max_used_idle_pct>
<venue name="home"><disk_max_used_gb>1</disk_max_used_gb></venue></global_preferences>
<host_info><m_nbytes>4e9</m_nbytes><d_total>1e12</d_total><d_free>5e11</d_free></host_info>
<disk_usage><d_boinc_used_total>3e9</d_boinc_used_total>
<d_boinc_used_project>1e9</d_boinc_used_project></disk_usage>
<net_stats><bwup>1000</bwup><bwdown>250000</bwdown></net_stats>
</scheduler_request>"""
    request = parse_request(body).request
    info = request.host_info
    assert (info.d_total, info.d_free, info.d_boinc_used_total, info.d_boinc_used_project, info.n_bwdown) == (
        1e12,
        5e11,
        3e9,
        1e9,
        250000.0,
    )
    # the working preferences win; they hold a whole document here, so the top level of
    # the element is the one BOINC reads: nothing at it
    assert request.global_prefs == GlobalPrefs()
    master = parse_request(body.replace(b"working_global_preferences", b"ignored")).request.global_prefs
    assert master == GlobalPrefs(
        disk_max_used_gb=100.0,
        disk_max_used_pct=50.0,
        disk_min_free_gb=2.0,
        ram_max_used_busy_frac=0.5,
        ram_max_used_idle_frac=0.9,
    )
    bare = parse_request(b"<scheduler_request><host_info/></scheduler_request>").request
    assert (bare.host_info.d_free, bare.host_info.n_bwdown) == (0.0, 0.0)


@pytest.mark.parametrize(
    "res, v, flops",
    [
        (dict(flops=2e9), dict(instances=2.0), 4e9),  # CPU: speed x CPUs used
        (dict(flops=2e9), dict(instances=0.0), 2e9 * 1e-3),  # never 0
        (dict(name="NVIDIA", flops=1e12), dict(instances=0.5), 5e11),
        (dict(name="NVIDIA", flops=1e12), dict(instances=0.0), 1e12 * 1e-3),
        (dict(name="NVIDIA", flops=0.0), dict(instances=0.5, flops=3e11), 3e11),  # the version's
    ],
)
def test_the_speed_a_job_gets(res, v, flops):
    assert job_flops(resource(**res), version(**v)) == pytest.approx(flops)


def request(
    cpu_secs=0.0, cpu_instances=0.0, gpus=(), work_req_seconds=0.0, on_frac=1.0, active_frac=1.0, gpu_active_frac=1.0
):
    return SchedulerRequest(
        host_info=HostInfo(),
        cpu_req_secs=cpu_secs,
        cpu_req_instances=cpu_instances,
        work_req_seconds=work_req_seconds,
        gpu_requests=list(gpus),
        time_stats=TimeStats(on_frac=on_frac, active_frac=active_frac, gpu_active_frac=gpu_active_frac),
    )


HOST = SimpleNamespace(p_fpops=1e9, p_ncpus=4)


def test_resources_are_asked_for_by_seconds_gpus_first():
    gpu = GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=100.0)
    found = requested_resources(HOST, request(cpu_secs=50.0, gpus=[gpu]))
    assert [(r.name, r.req_secs) for r in found] == [("NVIDIA", 100.0), (CPU, 50.0)]


def test_instances_alone_ask_for_nothing_but_count_once_seconds_are_asked():
    assert requested_resources(HOST, request(cpu_instances=2.0)) == []
    gpu = GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=100.0)
    found = requested_resources(HOST, request(cpu_instances=2.0, gpus=[gpu]))
    assert [r.name for r in found] == ["NVIDIA", CPU]


def test_a_gpu_type_with_no_device_is_not_a_resource():
    gpu = GpuRequest("NVIDIA", count=0, peak_flops=1e12, req_secs=100.0)
    assert [r.name for r in requested_resources(HOST, request(cpu_secs=5.0, gpus=[gpu]))] == [CPU]


def test_an_old_client_asks_with_work_req_seconds():
    [cpu] = requested_resources(HOST, request(work_req_seconds=300.0))
    assert (cpu.name, cpu.req_secs) == (CPU, 300.0)


def test_availability_is_on_frac_times_active_frac_clamped():
    gpu = GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=100.0)
    found = requested_resources(
        HOST, request(cpu_secs=5.0, gpus=[gpu], on_frac=0.5, active_frac=0.5, gpu_active_frac=0.1)
    )
    assert [r.available_frac for r in found] == [pytest.approx(0.1), pytest.approx(0.25)]


def hav(limit, sent, day):
    return SimpleNamespace(max_jobs_per_day=limit, n_jobs_today=sent, jobs_day=day)


def test_the_daily_quota_leaves_room_for_the_jobs_not_yet_sent_today():
    now = 100 * DAY + 10
    rows = {1: SimpleNamespace(pk=1), 2: SimpleNamespace(pk=2), 3: SimpleNamespace(pk=3)}
    versions = {10: version(row=rows[1]), 20: version(row=rows[2]), 30: version(row=rows[3]), 40: version()}
    havs = {1: hav(5, 3, 100), 2: hav(5, 30, 99), 3: None}
    havs = {k: v for k, v in havs.items() if v}
    limited = apply_daily_quota(versions, havs, resource(count=2), now=now, quota=500, gpu_multiplier=0)
    assert limited == [versions[10], versions[20]]
    assert (versions[10].limit, versions[10].room) == (10, 7)  # 5 x 2 CPUs, 3 today
    assert (versions[20].limit, versions[20].room) == (10, 10)  # yesterday's don't count
    assert versions[30].room is None and versions[40].room is None  # no record, anonymous
    assert apply_daily_quota(versions, havs, resource(), now=now, quota=0, gpu_multiplier=0) == []


def test_a_gpu_versions_quota_scales_by_gpu_multiplier_and_a_cpu_versions_does_not():
    row = SimpleNamespace(pk=1)
    for name, multiplier, limit in ((CPU, 3, 10), ("NVIDIA", 3, 30)):
        versions = {10: version(row=row)}
        apply_daily_quota(
            versions, {1: hav(5, 0, 0)}, resource(name=name, count=2), now=0, quota=500, gpu_multiplier=multiplier
        )
        assert versions[10].limit == limit


# --- check_disk and check_bandwidth through a whole request -----------------------------


def disk_work_request(host, d_free, n_bwdown=0.0, **fields):
    request = work_request(host, cpu_req_secs=1e6, work_req_seconds=1e6, **fields)
    request.host_info.d_total = 1e12
    request.host_info.d_free = d_free
    request.host_info.n_bwdown = n_bwdown
    return request


def test_jobs_are_sent_until_the_disk_allowance_is_used_up(project):
    host = project.host()
    jobs = [project.result(project.workunit(rsc_disk_bound=1e9, delay_bound=100 * DAY)) for _ in range(4)]
    # d_free less the project's 1 GB of free space leaves 2.5e9: two jobs of 1e9 fit, and
    # the third's 1e9 is more than the 0.5e9 left
    reply = handle_request(disk_work_request(host, d_free=GB + 2.5e9), project=demo_project(), now=NOW)
    assert [job.name for job in reply.results] == [jobs[0].name, jobs[1].name]


def test_a_host_short_of_disk_is_told_how_much_more_it_needs(project):
    host = project.host()
    project.result(project.workunit(rsc_disk_bound=1e9))
    reply = handle_request(disk_work_request(host, d_free=GB + 5e8), project=demo_project(), now=NOW)
    assert reply.results == []
    # 1e9 - 5e8 = 476.84 MB more; 5e8 available; 1e9 = 953.67 MB needed
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        (
            "uppercase needs 476.84MB more disk space.  You currently have 476.84 MB available and it needs 953.67 MB.",
            "notice",
        ),
    ]


def test_a_project_that_asks_for_less_free_disk_lets_the_host_fill_more(project):
    host = project.host()
    project.result(project.workunit(rsc_disk_bound=1e9))
    config = SchedulerConfig(default_disk_min_free_gb=0.0)
    assert (
        len(handle_request(disk_work_request(host, d_free=1e9), project=demo_project(), now=NOW, config=config).results)
        == 1
    )


def test_a_host_whose_downloads_are_too_slow_is_told_its_measured_speed(project):
    host = project.host()
    project.result(project.workunit(rsc_bandwidth_bound=1e6))
    fast = project.result(project.workunit(rsc_bandwidth_bound=5e5))
    reply = handle_request(disk_work_request(host, d_free=1e12, n_bwdown=5e5), project=demo_project(), now=NOW)
    assert [job.name for job in reply.results] == [fast.name]  # equal to its speed fits
    host2 = project.host()
    reply = handle_request(disk_work_request(host2, d_free=1e12, n_bwdown=4e5), project=demo_project(), now=NOW)
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        (
            "uppercase requires 976.56 KB/sec download bandwidth.  Your computer has been measured at 390.62 KB/sec.",
            "notice",
        ),
    ]


def test_a_host_that_never_measured_its_downloads_gets_bandwidth_bound_jobs(project):
    host = project.host()
    project.result(project.workunit(rsc_bandwidth_bound=1e9))
    assert (
        len(handle_request(disk_work_request(host, d_free=1e12, n_bwdown=0.0), project=demo_project(), now=NOW).results)
        == 1
    )


def test_a_simulated_host_that_reports_no_disk_figures_keeps_getting_work(project):
    host = project.host()
    project.result(project.workunit(rsc_disk_bound=1e15, rsc_bandwidth_bound=1e12))
    assert len(handle_request(work_request(host), project=demo_project(), now=NOW).results) == 1


# --- get_app_version: committed versions and the notices of the versions looked at ----------


def test_a_workunit_committed_to_a_superseded_version_is_sent_with_it(project):
    # check_homogeneous_app_version takes the committed version even when the feeder no
    # longer holds it; the host has no version of its own (the newest is beta, and its
    # volunteer takes no beta work), so an uncommitted workunit finds none
    from backend.models import AppVersion

    project.app.homogeneous_app_version = True
    project.app.save()
    old = AppVersionFactory(app=project.app, version_num=90, flops=1e9)
    AppVersion.objects.filter(pk=project.version.pk).update(beta=True)
    committed = project.result(project.workunit(app_version=old))
    project.result(project.workunit())
    reply = handle_request(work_request(project.host()), project=demo_project(), now=NOW)
    assert [(job.name, job.app_version.version_num) for job in reply.results] == [(committed.name, 90)]


MEMORY_NOTICE = ("uppercase needs 7629.39 MB RAM but only 3814.70 MB is available for use.", "notice")


def ask_for_a_day_with_4_gb(host):
    """The reply to a day's work request from ``host`` with 4 GB of memory: too little for
    the 8 GB jobs of the tests below."""
    request = work_request(host, work_req_seconds=86400.0)
    request.host_info.m_nbytes = 4e9
    return handle_request(request, project=demo_project(), now=NOW)


def test_a_job_committed_to_another_version_and_dropped_for_the_volunteer_gives_its_memory_notice(project):
    # sched_score.cpp send_work_score_type: each job of the cache takes get_app_version's
    # version, the committed one for a committed workunit (check_homogeneous_app_version),
    # and sched_check.cpp wu_is_infeasible_fast checks memory before slow_check applies the
    # one-result-per-user rule: the host is told it lacks memory for a job it may not have
    from backend.models import ServerState

    project.app.homogeneous_app_version = True
    project.app.save()
    old = AppVersionFactory(app=project.app, version_num=90, flops=1e9)
    host = project.host()
    wu = project.workunit(app_version=old, rsc_memory_bound=8e9)
    project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner)
    project.result(wu)
    reply = ask_for_a_day_with_4_gb(host)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("uppercase needs 7629.39 MB RAM but only 3814.70 MB is available for use.", "notice"),
    ]


def ask_two_cpus_for_a_day_with_4_gb(host):
    """``ask_for_a_day_with_4_gb`` from a host that says it has 2 CPUs."""
    request = work_request(host, work_req_seconds=86400.0)
    request.host_info.p_ncpus = 2
    request.host_info.m_nbytes = 4e9
    return handle_request(request, project=demo_project(), now=NOW)


def test_a_best_version_over_its_daily_quota_is_named_when_the_next_sends_nothing(project):
    # sched_version.cpp get_app_version calls daily_quota_exceeded for each version it looks
    # at: the best one, over its quota, adds "Daily job limit (n) has been reached" (n
    # scaled by the CPUs) though another version is taken; the job then lacks memory.
    # sched_send.cpp send_user_messages ends with quota_exceeded_version's low message,
    # which gives the record's own max_jobs_per_day, unscaled
    fast = AppVersionFactory(app=project.app, version_num=100, plan_class="mt", avg_ncpus=2.0, flops=2e9)
    host = project.host(p_ncpus=2)
    HostAppVersionFactory(host=host, app_version=fast, max_jobs_per_day=2, n_jobs_today=4, jobs_day=NOW // DAY)
    project.result(project.workunit(rsc_memory_bound=8e9))
    reply = ask_two_cpus_for_a_day_with_4_gb(host)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Daily job limit (4) has been reached", "notice"),
        ("uppercase needs 7629.39 MB RAM but only 3814.70 MB is available for use.", "notice"),
        ("This computer has finished a daily quota of 2 tasks", "low"),
    ]


@pytest.mark.parametrize("pinned, told", [(0, True), (101, False)])
def test_a_version_over_its_daily_quota_is_named_only_for_the_jobs_that_would_look_at_it(project, pinned, told):
    # get_app_version for a job pinned to version number 101 never looks at version 100, so
    # the daily quota of 100 is not named when nothing is sent; an unpinned job looks at both
    # (the differential's seed 9707 scheduler case 189 and seed 9808's 85 and 169)
    AppVersionFactory(app=project.app, version_num=101, plan_class="mt", avg_ncpus=2.0, flops=2e9)
    host = project.host(p_ncpus=2)
    HostAppVersionFactory(
        host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // DAY
    )
    project.result(project.workunit(rsc_memory_bound=8e9, app_version_num=pinned))
    reply = ask_two_cpus_for_a_day_with_4_gb(host)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        *([("Daily job limit (1) has been reached", "notice")] if told else []),
        MEMORY_NOTICE,
        *([("This computer has finished a daily quota of 1 tasks", "low")] if told else []),
    ]


def committed_job_over_quota(project):
    """A one-CPU host and a job of priority 1 committed to a version (homogeneous app
    version) the host has used up its daily quota of; returns the host."""
    project.app.homogeneous_app_version = True
    project.app.save()
    old = AppVersionFactory(app=project.app, version_num=90, flops=1e9)
    host = project.host(p_ncpus=1)
    HostAppVersionFactory(host=host, app_version=old, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // DAY)
    project.result(project.workunit(app_version=old), priority=1)
    return host


def test_a_committed_job_whose_version_is_over_its_daily_quota_ends_the_pass(project):
    # sched_score.cpp send_work_score_type checks daily_quota_exceeded for each job's version
    # before sending it, the committed version of a committed workunit too (which
    # check_homogeneous_app_version took without looking at the quota): it names the limit
    # and ends the processor type's pass, so the uncommitted job after it is not sent either
    host = committed_job_over_quota(project)
    project.result(project.workunit())
    reply = handle_request(work_request(host, work_req_seconds=86400.0), project=demo_project(), now=NOW)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Daily job limit (1) has been reached", "notice"),
        ("This computer has finished a daily quota of 1 tasks", "low"),
    ]


def over_quota_and_lacking(project, lacking_priority):
    """A committed job of priority 1 whose version is over its daily quota on the host, and
    an 8 GB job of ``lacking_priority`` whose other result the volunteer already has; the
    reply to a day's work request with 4 GB of memory."""
    from backend.models import ServerState

    host = committed_job_over_quota(project)
    wu = project.workunit(rsc_memory_bound=8e9)
    project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner)
    project.result(wu, priority=lacking_priority)
    return ask_for_a_day_with_4_gb(host)


@pytest.mark.parametrize("lacking_priority, told", [(0, False), (2, True)])
def test_the_jobs_after_a_committed_job_over_its_quota_are_never_checked_for_memory(project, lacking_priority, told):
    # sched_score.cpp send_work_score_type sorts its jobs by score and stops at the first whose
    # version daily_quota_exceeded: an 8 GB job (kept from the host by the one-result-per-user
    # rule, which slow_check applies later) gives its memory notice only when it comes before
    # the committed job over its quota (the differential's seed 9606 scheduler case 56)
    reply = over_quota_and_lacking(project, lacking_priority)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        *([MEMORY_NOTICE] if told else []),
        ("Daily job limit (1) has been reached", "notice"),
        ("This computer has finished a daily quota of 1 tasks", "low"),
    ]


def committed_job_for_reliable_hosts(project, *, reliable, kept_from_volunteer, never_reliable=False):
    """The reply to a day's work request from a host with 4 GB of memory, whose best version
    and an older one (reliable on the host or not) are both known, when the only job (8 GB,
    priority 1, reliable_on_priority 1) is committed to the older version; the volunteer may
    already have the workunit's other result."""
    from backend.models import ServerState

    project.app.homogeneous_app_version = True
    project.app.save()
    old = AppVersionFactory(app=project.app, version_num=90, flops=1e9)
    host = project.host(p_ncpus=1)
    HostAppVersionFactory(host=host, app_version=project.version, consecutive_valid=20, max_jobs_per_day=100)
    HostAppVersionFactory(host=host, app_version=old, consecutive_valid=20 if reliable else 3, max_jobs_per_day=100)
    wu = project.workunit(app_version=old, rsc_memory_bound=8e9 if kept_from_volunteer else 1e8)
    if kept_from_volunteer:
        project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner)
    project.result(wu, priority=1)
    request = work_request(host, work_req_seconds=86400.0)
    request.host_info.m_nbytes = 4e9
    config = SchedulerConfig(
        reliable_on_priority=1, daily_result_quota=100, boinc_committed_never_reliable=never_reliable
    )
    return handle_request(request, project=demo_project(), now=NOW, config=config)


@pytest.mark.parametrize(
    "reliable, never_reliable, told", [(False, False, False), (True, False, True), (True, True, False)]
)
def test_a_job_that_needs_a_reliable_host_is_checked_with_its_committed_versions_reliability(
    project, reliable, never_reliable, told
):
    # JOB::get_score leaves a job of priority reliable_on_priority out of the scan when its
    # version, the committed one (check_homogeneous_app_version), is not reliable on the
    # host, whatever the host's best version: its memory is then never checked (the
    # differential's seed 9606 scheduler case 41); BOINC's code counts no committed version
    # reliable (boinc_committed_never_reliable, BOINC defect 4)
    reply = committed_job_for_reliable_hosts(
        project, reliable=reliable, kept_from_volunteer=True, never_reliable=never_reliable
    )
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        *([MEMORY_NOTICE] if told else []),
    ]


@pytest.mark.parametrize("never_reliable", [False, True])
def test_a_job_for_reliable_hosts_committed_to_a_version_goes_only_where_that_version_is_reliable(
    project, never_reliable
):
    # boincweb sends it to a host reliable on the committed version; BOINC's
    # check_homogeneous_app_version leaves the version's reliable flag false, so BOINC never
    # sends it to anyone (docs/server-fidelity.md, BOINC defect 4)
    reply = committed_job_for_reliable_hosts(
        project, reliable=True, kept_from_volunteer=False, never_reliable=never_reliable
    )
    assert len(reply.results) == (0 if never_reliable else 1)


NEWER_SPEC = """<plan_classes><plan_class><name>newer</name>
<min_core_client_version>80000</min_core_client_version></plan_class></plan_classes>"""


@pytest.mark.parametrize("pinned, told", [(100, False), (0, True)])
def test_a_plan_class_notice_comes_only_from_versions_a_job_could_take(project, tmp_path, pinned, told):
    # the only version needs a client of 8.0 or later: get_app_version checks its plan class
    # (and says "A newer BOINC ...") for an unpinned job, but skips it for a job pinned to
    # version number 100 before looking at its plan class
    from protocol.models import AppVersionFile

    spec = tmp_path / "plan_class_spec.xml"
    spec.write_text(NEWER_SPEC)
    project.version.delete()
    newer = AppVersionFactory(app=project.app, version_num=101, plan_class="newer", flops=1e9)
    AppVersionFile.objects.create(
        project=demo_project(),
        app_version=newer,
        name="uppercase_101",
        nbytes=10,
        md5_cksum="0" * 32,
        file_signature="x",
    )
    project.result(project.workunit(app_version_num=pinned))
    request = work_request(project.host(), work_req_seconds=86400.0, core_client_version="7.6.33")
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(plan_class_spec=str(spec)))
    assert reply.results == []
    assert [m.text for m in reply.messages] == ["No tasks sent"] + (
        ["A newer BOINC may be required for some tasks."] if told else []
    )


@pytest.mark.parametrize(
    "client, text",
    [
        ("7.6.33", "Tasks won't finish in time: BOINC runs 50.0% of the time; computation is enabled 25.0% of that"),
        ("", "Tasks won't finish in time: Computer available 50.0% of the time"),
    ],
)
def test_a_host_too_slow_for_every_deadline_is_told_how_much_it_computes(project, client, text):
    # send_user_messages: speed.insufficient, set when check_deadline refuses a job; the
    # wording of clients after 4.19 (41900) or before
    from protocol.models import AppVersionFile

    AppVersionFile.objects.create(
        project=demo_project(),
        app_version=project.version,
        name="uppercase_100",
        nbytes=10,
        md5_cksum="0" * 32,
        file_signature="x",
    )
    host = project.host(on_frac=0.5, active_frac=0.25)
    project.result(project.workunit(delay_bound=3600))  # 3600 s of computing
    request = work_request(host, work_req_seconds=86400.0, estimated_delay=1.0, core_client_version=client)
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [("No tasks sent", "low"), (text, "low")]


def test_a_version_over_its_daily_quota_gives_no_notice_of_what_its_jobs_need(project):
    # sched_version.cpp get_app_version finds no version within the daily quota, so
    # sched_score.cpp send_work_score_type never takes the job and wu_is_infeasible_fast never
    # checks its memory: the reply names the limit only (the differential's seed 9101
    # scheduler cases 2, 59, 84, 104, 240 and 295)
    host = project.host(p_ncpus=1)
    HostAppVersionFactory(
        host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=3, jobs_day=NOW // DAY
    )
    project.result(project.workunit(rsc_memory_bound=8e9))
    reply = ask_for_a_day_with_4_gb(host)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Daily job limit (1) has been reached", "notice"),
        ("This computer has finished a daily quota of 1 tasks", "low"),
    ]


def test_a_job_dropped_for_the_volunteer_that_would_miss_its_deadline_says_so(project):
    # sched_check.cpp wu_is_infeasible_fast ends with check_deadline, before slow_check
    # applies the one-result-per-user rule: BOINC sets speed.insufficient for a job the
    # volunteer may not have, and says "Tasks won't finish in time" when nothing is sent
    from backend.models import ServerState

    host = project.host(on_frac=0.5, active_frac=0.25)
    wu = project.workunit(delay_bound=3600)  # 3600 s of computing, at a quarter of the time
    project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner)
    project.result(wu)
    request = work_request(host, work_req_seconds=86400.0, estimated_delay=1.0, core_client_version="")
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Tasks won't finish in time: Computer available 50.0% of the time", "low"),
    ]
    # with time enough, nothing to say
    from backend.models import Workunit

    Workunit.objects.filter(pk=wu.pk).update(delay_bound=86400)
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert [(m.text, m.priority) for m in reply.messages] == [("No tasks sent", "low")]


def test_a_processor_type_at_its_limit_is_told_though_another_goes_on(project):
    # sched_send.cpp work_needed flags each processor type the project has apps for that is
    # at its limit of jobs in progress, and goes on with the others; a reply that then sends
    # nothing says the host has reached a limit (send_user_messages, max_jobs_exceeded)
    from backend.daemons.scheduler import GpuRequest, SchedulerConfig
    from backend.models import ServerState

    host = project.host(p_ncpus=1)
    running = project.result(
        project.workunit(),
        server_state=ServerState.IN_PROGRESS,
        host=host,
        user_id=host.owner_id,
        sent_time=NOW - 100,
        report_deadline=NOW + 86400,
    )
    project.result(project.workunit())
    # the GPU asks for work, which no version of the project runs; the CPU is at its limit
    request = work_request(host, other_results=[running.name], gpu_requests=[GpuRequest("NVIDIA", req_secs=600)])
    config = SchedulerConfig(max_wus_in_progress=1, max_wus_in_progress_gpu=5)
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    assert ("This computer has reached a limit on tasks in progress", "low") in [
        (m.text, m.priority) for m in reply.messages
    ]
    # under its limit, nothing of the kind
    reply = handle_request(
        request, project=demo_project(), now=NOW, config=SchedulerConfig(max_wus_in_progress=2, max_wus_to_send=1)
    )
    assert "This computer has reached a limit on tasks in progress" not in [m.text for m in reply.messages]


@pytest.mark.parametrize("last_of_other_class, told", [(False, False), (True, True)])
def test_a_job_kept_from_the_volunteer_is_still_checked_for_its_class(project, last_of_other_class, told):
    # sched_check.cpp wu_is_infeasible_fast checks a job's homogeneous redundancy class
    # (resetting hr_reject_temp) before slow_check applies the one-result-per-user rule, so
    # the last job of BOINC's order decides "Tasks are committed to other platforms" even
    # when the volunteer already has one of its workunit
    import dataclasses

    from backend.models import ServerState

    project.app.homogeneous_redundancy = 1
    project.app.save()
    host = project.host()
    other = project.host(owner=host.owner)
    # first (committed: scores one more), a job committed to another class
    project.result(project.workunit(hr_class=256 + 21))
    # last, a job of a workunit the volunteer has a result of: uncommitted, or committed to
    # another class
    wu = project.workunit(hr_class=256 + 21 if last_of_other_class else 0)
    project.result(wu, server_state=ServerState.IN_PROGRESS, host=other, user=host.owner)
    project.result(wu, priority=-1)
    request = work_request(host, work_req_seconds=86400.0)
    request.host_info = dataclasses.replace(
        request.host_info, os_name="Linux", p_vendor="GenuineIntel", p_model="Intel(R) Xeon(R) CPU E5-2670"
    )
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert (("Tasks are committed to other platforms", "low") in [(m.text, m.priority) for m in reply.messages]) is told


@pytest.mark.parametrize("committed, told", [(True, False), (False, True)])
def test_a_committed_job_never_looks_at_the_other_versions_plan_classes(project, tmp_path, committed, told):
    # sched_version.cpp get_app_version: a workunit committed to an app version under
    # homogeneous app version goes through check_homogeneous_app_version, never the scan of
    # the app's versions whose plan class checks say "A newer BOINC ..." (the differential's
    # seed 9202 scheduler case 290); the job is then kept from the volunteer, who has one
    from backend.models import ServerState
    from protocol.models import AppVersionFile

    spec = tmp_path / "plan_class_spec.xml"
    spec.write_text(NEWER_SPEC)
    project.app.homogeneous_app_version = True
    project.app.save()
    newer = AppVersionFactory(app=project.app, version_num=101, plan_class="newer", flops=1e9)
    for version in (project.version, newer):
        AppVersionFile.objects.create(
            project=demo_project(), app_version=version, name=f"exe{version.pk}", nbytes=1, md5_cksum="0" * 32
        )
    host = project.host()
    wu = project.workunit(app_version=project.version if committed else None)
    project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner)
    project.result(wu)
    request = work_request(host, work_req_seconds=86400.0, core_client_version="7.6.33")
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(plan_class_spec=str(spec)))
    assert reply.results == []
    assert ("A newer BOINC may be required for some tasks." in [m.text for m in reply.messages]) is told


def test_among_equal_scores_the_higher_priority_job_is_checked_first(project):
    # sched_score.cpp sorts a few jobs by score keeping the feeder's slot order
    # (--priority_order: result priority, highest first) among equal scores: a job of
    # priority 1 and a committed job of priority 0 (score 0 + 1) tie, the committed one is
    # checked last, and its class decides "Tasks are committed to other platforms" (the
    # differential's seed 9303 scheduler case 42). Many more jobs of each kind take the
    # candidate query past its first chunk.
    import dataclasses

    project.app.homogeneous_redundancy = 1
    project.app.save()
    for _ in range(12):
        project.result(project.workunit(hr_class=256 + 21), priority=0)
        project.result(project.workunit(delay_bound=1), priority=1)  # misses its deadline
    request = work_request(project.host(), work_req_seconds=86400.0, estimated_delay=1.0, core_client_version="")
    request.host_info = dataclasses.replace(
        request.host_info, os_name="Linux", p_vendor="GenuineIntel", p_model="Intel(R) Xeon(R) CPU E5-2670"
    )
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert ("Tasks are committed to other platforms", "low") in [(m.text, m.priority) for m in reply.messages]
