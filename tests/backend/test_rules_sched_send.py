"""The scheduler's arithmetic of sending, each expectation read off BOINC's sched/sched_send.cpp
(clamp_frac, get_mem_sizes, get_job_limits, add_result_to_reply / update_estimated_delay,
estimate_duration) and sched_check.cpp (check_memory, check_deadline), and the server side
of sched_version.cpp's daily quota (daily_quota_exceeded, scaled_max_jobs_per_day)."""

from types import SimpleNamespace

import pytest

from backend.daemons.sched_send import (
    CPU, DEADLINE, MEMORY, Resource, Version, after_sending, apply_daily_quota, clamp_frac,
    infeasible, job_flops, max_jobs_per_rpc, requested_resources, usable_ram,
)
from backend.daemons.sched_types import (
    GpuRequest, HostInfo, ReplyAppVersion, SchedulerConfig, SchedulerRequest, TimeStats,
)

DAY = 86400


def resource(name=CPU, req_secs=1000.0, req_instances=0.0, delay=0.0, flops=1e9, frac=1.0,
             count=1, ram=None):
    return Resource(name, req_secs, req_instances, delay, flops, frac, count, ram)


def version(instances=1.0, flops=0.0, row=None):
    return Version(row, ReplyAppVersion("app", 100, "x86_64-pc-linux-gnu", flops=flops),
                   instances)


@pytest.mark.parametrize("frac, clamped", [(0.02, 0.1), (0.1, 0.1), (0.5, 0.5), (1.0, 1.0),
                                           (1.7, 1.0), (-1.0, 0.1)])
def test_an_availability_is_held_between_a_tenth_and_one(frac, clamped):
    assert clamp_frac(frac) == clamped


@pytest.mark.parametrize("m_nbytes, ram", [(2e9, 2e9), (0, 64e6), (-5, 64e6), (None, None)])
def test_a_host_that_gives_no_ram_is_taken_to_have_64_mb(m_nbytes, ram):
    assert usable_ram(SimpleNamespace(host_info=SimpleNamespace(m_nbytes=m_nbytes))) == ram


@pytest.mark.parametrize("ncpus, gpus, max_wus, multiplier, jobs", [
    (4, [], 10, 0, 40),
    (0, [], 10, 0, 10),          # at least one CPU
    (200, [], 10, 0, 640),       # at most max_ncpus (64)
    (4, [2, 1], 10, 0, 40),      # GPUs add nothing with gpu_multiplier 0
    (4, [2, 1], 10, 2, 100),     # 10 x (4 + 2 x 3)
    (4, [2, 0], 3, 1, 18),       # a GPU type with no device counts 0
    (4, [], 0, 0, 999999),       # max_wus_to_send 0: no limit
])
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
    assert (before.req_secs, before.estimated_delay) == (20_000.0, 100.0)   # a new value


def test_a_resource_with_no_count_queues_as_one_instance():
    after = after_sending(resource(delay=0.0, count=0), [(None, version(), 500.0)])
    assert after.estimated_delay == pytest.approx(500.0)


@pytest.mark.parametrize("wu, res, runtime, why", [
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
])
def test_a_job_is_refused_for_memory_then_for_its_deadline(wu, res, runtime, why):
    config = SchedulerConfig()
    assert infeasible(SimpleNamespace(**wu), resource(**res), runtime, config) == why


def test_ignore_delay_bound_skips_the_deadline_check_but_not_memory():
    config = SchedulerConfig(ignore_delay_bound=True)
    late = SimpleNamespace(rsc_memory_bound=0, delay_bound=100)
    assert infeasible(late, resource(delay=50.0), 1000, config) == ""
    big = SimpleNamespace(rsc_memory_bound=3e9, delay_bound=100)
    assert infeasible(big, resource(ram=2e9), 1, config) == MEMORY


@pytest.mark.parametrize("res, v, flops", [
    (dict(flops=2e9), dict(instances=2.0), 4e9),            # CPU: speed x CPUs used
    (dict(flops=2e9), dict(instances=0.0), 2e9 * 1e-3),     # never 0
    (dict(name="NVIDIA", flops=1e12), dict(instances=0.5), 5e11),
    (dict(name="NVIDIA", flops=1e12), dict(instances=0.0), 1e12 * 1e-3),
    (dict(name="NVIDIA", flops=0.0), dict(instances=0.5, flops=3e11), 3e11),  # the version's
])
def test_the_speed_a_job_gets(res, v, flops):
    assert job_flops(resource(**res), version(**v)) == pytest.approx(flops)


def request(cpu_secs=0.0, cpu_instances=0.0, gpus=(), work_req_seconds=0.0, on_frac=1.0,
            active_frac=1.0, gpu_active_frac=1.0):
    return SchedulerRequest(
        host_info=HostInfo(), cpu_req_secs=cpu_secs, cpu_req_instances=cpu_instances,
        work_req_seconds=work_req_seconds, gpu_requests=list(gpus),
        time_stats=TimeStats(on_frac=on_frac, active_frac=active_frac,
                             gpu_active_frac=gpu_active_frac))


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
    assert [r.name for r in requested_resources(HOST, request(cpu_secs=5.0, gpus=[gpu]))] == [
        CPU]


def test_an_old_client_asks_with_work_req_seconds():
    [cpu] = requested_resources(HOST, request(work_req_seconds=300.0))
    assert (cpu.name, cpu.req_secs) == (CPU, 300.0)


def test_availability_is_on_frac_times_active_frac_clamped():
    gpu = GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=100.0)
    found = requested_resources(HOST, request(cpu_secs=5.0, gpus=[gpu], on_frac=0.5,
                                              active_frac=0.5, gpu_active_frac=0.1))
    assert [r.available_frac for r in found] == [pytest.approx(0.1), pytest.approx(0.25)]


def hav(limit, sent, day):
    return SimpleNamespace(max_jobs_per_day=limit, n_jobs_today=sent, jobs_day=day)


def test_the_daily_quota_leaves_room_for_the_jobs_not_yet_sent_today():
    now = 100 * DAY + 10
    rows = {1: SimpleNamespace(pk=1), 2: SimpleNamespace(pk=2), 3: SimpleNamespace(pk=3)}
    versions = {10: version(row=rows[1]), 20: version(row=rows[2]), 30: version(row=rows[3]),
                40: version()}
    havs = {1: hav(5, 3, 100), 2: hav(5, 30, 99), 3: None}
    havs = {k: v for k, v in havs.items() if v}
    limited = apply_daily_quota(versions, havs, resource(count=2), now=now, quota=500,
                                gpu_multiplier=0)
    assert limited == [versions[10], versions[20]]
    assert (versions[10].limit, versions[10].room) == (10, 7)       # 5 x 2 CPUs, 3 today
    assert (versions[20].limit, versions[20].room) == (10, 10)      # yesterday's don't count
    assert versions[30].room is None and versions[40].room is None  # no record, anonymous
    assert apply_daily_quota(versions, havs, resource(), now=now, quota=0,
                             gpu_multiplier=0) == []


def test_a_gpu_versions_quota_scales_by_gpu_multiplier_and_a_cpu_versions_does_not():
    row = SimpleNamespace(pk=1)
    for name, multiplier, limit in ((CPU, 3, 10), ("NVIDIA", 3, 30)):
        versions = {10: version(row=row)}
        apply_daily_quota(versions, {1: hav(5, 0, 0)}, resource(name=name, count=2),
                          now=0, quota=500, gpu_multiplier=multiplier)
        assert versions[10].limit == limit
