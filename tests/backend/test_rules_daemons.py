"""BOINC's rules the daemons must keep, each test's expectation taken from BOINC's sched/ code
(BOINC/boinc c5c6cb79) or reference/server.md, not from what boincweb prints: the gaps a
mutation run (bench/mutation.py) found, where a changed rule left every other test green."""

import math

import pytest

from backend.daemons import file_deleter, transitioner, validator
from backend.daemons.hierarchy import download_path, upload_path
from backend.daemons.scheduler import handle_request
from backend.models import (
    AppVersion,
    ErrorMask,
    File,
    FileDeleteState,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, FileFactory, HostFileFactory, ResultFactory, demo_project

DAY = 86400


def sent(reply):
    return [job.name for job in reply.results]


# --- sched_version.cpp get_app_version: only versions for the host's platforms -------------


def test_a_host_gets_no_job_of_an_app_whose_versions_are_all_for_other_platforms(project):
    AppVersion.objects.filter(pk=project.version.pk).update(platform="windows_x86_64")
    project.result(project.workunit())
    host = project.host()
    assert sent(handle_request(work_request(host), project=demo_project(), now=NOW)) == []


def test_a_host_gets_the_version_of_an_alternative_platform_it_names(project):
    AppVersion.objects.filter(pk=project.version.pk).update(platform="i686-pc-linux-gnu")
    job = project.result(project.workunit())
    request = work_request(project.host(), alt_platforms=["i686-pc-linux-gnu"])
    [reply] = handle_request(request, project=demo_project(), now=NOW).results
    assert (reply.name, reply.app_version.platform) == (job.name, "i686-pc-linux-gnu")


def test_a_deprecated_app_gets_no_jobs_sent_whatever_its_versions(project):
    # the feeder leaves deprecated apps out of the shared memory the scheduler reads
    project.result(project.workunit())
    project.app.deprecated = True
    project.app.save()
    assert sent(handle_request(work_request(project.host()), project=demo_project(), now=NOW)) == []


# --- sched_send.cpp update_estimated_delay: each job sent lengthens the queue ----------------


def test_each_job_sent_lengthens_the_queue_the_next_ones_deadline_check_sees(project):
    host = project.host()
    # 1800 s each on a 1e9 FLOPS CPU, a 3600 s bound, 1 s already queued: the first fits
    # (1 + 1800), the second would finish at 1801 + 1800 > 3600
    for _ in range(3):
        project.result(project.workunit(delay_bound=3600, rsc_fpops_est=1800e9))
    reply = handle_request(work_request(host, cpu_req_secs=1e6, estimated_delay=1), project=demo_project(), now=NOW)
    assert len(reply.results) == 1


# --- transitioner.cpp: nerrors > max_error_results, each error result counted once -----------


@pytest.mark.parametrize("outcome", [Outcome.VALIDATE_ERROR, Outcome.CLIENT_ERROR])
@pytest.mark.parametrize("errors, error_out", [(1, False), (2, True)])
def test_each_error_result_counts_once_towards_max_error_results(project, outcome, errors, error_out):
    wu = project.workunit(max_error_results=1, max_total_results=10, transition_time=NOW - 1)
    for _ in range(errors):
        project.result(wu, server_state=ServerState.OVER, outcome=outcome)
    project.result(wu, server_state=ServerState.IN_PROGRESS, report_deadline=NOW + DAY)
    transitioner.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert bool(wu.error_mask & ErrorMask.TOO_MANY_ERROR_RESULTS) is error_out


# --- the numeric comparison: NaN equals NaN and nothing else (the whole validator: test_pipeline.py
# test_rule_3_7_numeric_outputs_agree_only_within_the_tolerance)


def test_numeric_comparison_is_symmetric_in_nan():
    class App:
        validate_tolerance = 0.0

    assert validator.numeric_compare([math.nan], [math.nan], App)
    assert not validator.numeric_compare([math.nan], [0.0], App)
    assert not validator.numeric_compare([0.0], [math.nan], App)


# --- file_deleter.cpp: a failed unlink is FILE_DELETE_ERROR, not DONE ------------------------


def test_an_output_that_cannot_be_unlinked_leaves_the_result_in_error(project):
    wu = project.workunit()
    r = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, file_delete_state=FileDeleteState.READY
    )
    out = FileFactory(result=r)
    # a directory where the file should be: unlink fails with EISDIR, whoever runs the test
    (upload_path(demo_project(), out.name) / "inside").mkdir(parents=True)
    file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8)
    r.refresh_from_db()
    out.refresh_from_db()
    assert r.file_delete_state == FileDeleteState.ERROR
    assert out.file_delete_state == FileDeleteState.INIT


def test_an_input_that_cannot_be_unlinked_leaves_the_workunit_in_error(project):
    wu = project.workunit(file_delete_state=FileDeleteState.READY)
    good = project.workunit(file_delete_state=FileDeleteState.READY)
    for w, name in ((wu, "stuck.dat"), (good, "fine.dat")):
        f = FileFactory(name=name)
        w.input_files.add(f)
    (download_path(demo_project(), "stuck.dat") / "inside").mkdir(parents=True)
    download_path(demo_project(), "fine.dat").write_bytes(b"x")
    file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8)
    states = dict(Workunit.objects.values_list("name", "file_delete_state"))
    assert states == {wu.name: FileDeleteState.ERROR, good.name: FileDeleteState.DONE}
    assert dict(File.objects.values_list("name", "file_delete_state")) == {
        "stuck.dat": FileDeleteState.INIT,
        "fine.dat": FileDeleteState.DONE,
    }
    assert not download_path(demo_project(), "fine.dat").exists()


# --- validator.cpp: max_granted_credit, 200 x 1000 x 365 by default --------------------------


@pytest.mark.parametrize(
    "fpops, credit",
    [
        (86400e9, 200.0),  # a day of a 1 GFLOPS machine: 200
        (86400e9 * 1000 * 365 * 2, 200 * 1000 * 365),  # twice the cap: the cap
    ],
)
def test_granted_credit_is_capped_at_max_granted_credit(project, fpops, credit):
    wu = project.workunit(rsc_fpops_est=fpops, rsc_fpops_bound=10 * fpops, need_validate=True)
    r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=project.host())
    FileFactory(result=r, md5_cksum="a")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    r.refresh_from_db()
    assert r.granted_credit == pytest.approx(credit)
    assert Result.objects.get(pk=r.pk).host.total_credit == pytest.approx(credit)


# --- feeder.cpp / sched_shmem.h: the scheduler sees a cache of MAX_WU_RESULTS (100) jobs ------


@pytest.mark.parametrize("cache, sent_count", [(None, 0), (101, 1)])
def test_a_job_behind_a_full_cache_of_unsendable_ones_is_not_seen(project, cache, sent_count):
    from backend.daemons.sched_types import SchedulerConfig

    for _ in range(100):  # each needs more RAM than the host has
        project.result(project.workunit(rsc_memory_bound=4e9))
    fits = project.result(project.workunit())
    host = project.host()
    request = work_request(host)
    request.host_info.m_nbytes = 2e9
    config = SchedulerConfig() if cache is None else SchedulerConfig(shmem_work_items=cache)
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert sent(reply) == [fits.name] * sent_count


# --- file_deleter.cpp: a pass splits its batch three to one between results and workunits ----


@pytest.mark.parametrize("batch, results_done, wus_done", [(8, 6, 2), (4, 3, 1), (1, 1, 1)])
def test_a_file_deleter_pass_takes_three_results_to_one_workunit(project, batch, results_done, wus_done):
    for _ in range(10):
        wu = project.workunit(file_delete_state=FileDeleteState.READY)
        project.result(
            wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, file_delete_state=FileDeleteState.READY
        )
    upload_path(demo_project(), "x").parent.mkdir(parents=True, exist_ok=True)
    download_path(demo_project(), "x").parent.mkdir(parents=True, exist_ok=True)
    assert file_deleter.run_once(project=demo_project(), now=NOW, batch_size=batch) == results_done + wus_done
    assert Result.objects.filter(file_delete_state=FileDeleteState.DONE).count() == results_done
    assert Workunit.objects.filter(file_delete_state=FileDeleteState.DONE).count() == wus_done


# --- sched_send.cpp add_result_to_reply / DB_RESULT::mark_as_sent ---------------------------


def test_a_sent_result_records_its_host_time_version_and_deadline_with_the_grace(project):
    from backend.daemons.sched_types import SchedulerConfig

    host = project.host()
    job = project.result(project.workunit(delay_bound=DAY, rsc_fpops_est=3600e9))
    reply = handle_request(
        work_request(host), project=demo_project(), now=NOW, config=SchedulerConfig(report_grace_period=600)
    )
    [got] = reply.results
    assert got.report_deadline == NOW + DAY  # the client is told no grace
    job.refresh_from_db()
    assert (job.server_state, job.host_id, job.user_id, job.sent_time, job.report_deadline, job.app_version_id) == (
        ServerState.IN_PROGRESS,
        host.pk,
        host.owner_id,
        NOW,
        NOW + DAY + 600,
        project.version.pk,
    )
    assert job.flops_estimate == pytest.approx(1e9)
    assert Workunit.objects.get(pk=job.workunit_id).transition_time == NOW + DAY + 600


def test_a_gpu_request_that_gives_no_queue_has_an_empty_one(project):
    # sched_check.cpp check_deadline: nothing queued, no deadline check
    from backend.daemons.scheduler import GpuRequest

    AppVersionFactory(app=project.app, version_num=100, plan_class="cuda", gpu_type="NVIDIA", gpu_usage=1.0, flops=1e9)
    job = project.result(project.workunit(delay_bound=10, rsc_fpops_est=1000e12))
    request = work_request(
        project.host(),
        cpu_req_secs=0,
        cpu_req_instances=0,
        gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=1e6)],
    )
    assert sent(handle_request(request, project=demo_project(), now=NOW)) == [job.name]


def test_the_infeasible_queue_stamps_only_the_results_the_request_looked_at(project):
    from backend.daemons.sched_types import SchedulerConfig

    elsewhere = ResultFactory(workunit__app__name="other", server_state=ServerState.UNSENT)
    slow = project.host(p_fpops=1e6)
    job = project.result(project.workunit())
    config = SchedulerConfig(seed003_infeasible_queue=True, infeasible_timeout=1000)
    handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=NOW, config=config)
    assert Result.objects.get(pk=job.pk).infeasible_since == NOW
    assert Result.objects.get(pk=elsewhere.pk).infeasible_since == 0


def test_a_request_that_asks_for_no_work_gets_none(project):
    # sched_send.cpp send_work: no seconds asked of any resource, nothing sent
    project.result(project.workunit())
    request = work_request(project.host(), cpu_req_secs=0, cpu_req_instances=0)
    assert sent(handle_request(request, project=demo_project(), now=NOW)) == []


def test_an_ordinary_jobs_input_is_neither_sticky_nor_reported_on_rpc(project):
    # sched_send.cpp: <sticky/> and <report_on_rpc/> come only from the workunit's file refs
    wu = project.workunit()
    wu.input_files.add(FileFactory(name="in.dat", nbytes=10))
    project.result(wu)
    [job] = handle_request(work_request(project.host()), project=demo_project(), now=NOW).results
    [f] = job.workunit.input_files
    assert (f.name, f.sticky, f.report_on_rpc) == ("in.dat", False, False)
    [out] = job.output_files  # nor is an output (the result template has neither)
    assert (out.sticky, out.report_on_rpc) == (False, False)


def test_a_host_that_gives_no_benchmark_counts_as_one_gflops(project):
    # client/cs_benchmark.cpp DEFAULT_FPOPS: 1e9 until the benchmarks have run
    from backend.daemons.scheduler import HostInfo, SchedulerRequest

    host = project.host(p_fpops=5e9)
    project.result(project.workunit(rsc_fpops_est=3600e9))
    request = SchedulerRequest(
        hostid=host.pk,
        userid=host.owner_id,
        host_info=HostInfo(domain_name=host.domain_name),
        cpu_req_secs=86400.0,
        cpu_req_instances=1.0,
    )
    [job] = handle_request(request, project=demo_project(), now=NOW).results
    assert job.estimated_runtime == pytest.approx(3600.0)


@pytest.mark.parametrize("blank", ["domain_name", "os_name"])
def test_a_request_without_its_domain_or_os_name_is_never_matched_to_a_host(project, blank):
    # handle_request.cpp find_host_by_other: every field must be given, even where a host
    # of the account has the same field empty
    from backend.daemons.scheduler import HostInfo, SchedulerRequest
    from backend.models import Host

    fields = dict(domain_name="box", os_name="Linux", p_ncpus=1)
    fields[blank] = ""
    old = project.host(os_name=fields["os_name"])
    Host.objects.filter(pk=old.pk).update(domain_name=fields["domain_name"])
    request = SchedulerRequest(hostid=0, userid=old.owner_id, host_info=HostInfo(**fields))
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.hostid != old.pk
    assert Host.objects.filter(owner_id=old.owner_id).count() == 2


# --- handle_request.cpp: what a request says of the host ---------------------------------------


@pytest.mark.parametrize("count, recorded", [(1, ("NVIDIA", 1)), (0, ("", 0))])
def test_a_host_records_the_gpus_it_reports(project, count, recorded):
    from backend.daemons.scheduler import GpuRequest
    from backend.models import Host

    host = project.host()
    request = work_request(host, gpu_requests=[GpuRequest("NVIDIA", count=count, peak_flops=1e12)])
    handle_request(request, project=demo_project(), now=NOW)
    host = Host.objects.get(pk=host.pk)
    assert (host.gpu_type, host.gpu_count) == recorded
    assert host.gpu_peak_flops == (1e12 if count else 0.0)


def test_a_sticky_file_the_host_no_longer_lists_is_forgotten_and_only_that_one(project):
    from backend.daemons.scheduler import StickyFile
    from backend.models import HostFile

    host, other = project.host(), project.host()
    HostFileFactory(host=other, name="b.dat", reported_time=NOW - 1)
    handle_request(
        work_request(host, file_infos=[StickyFile("a.dat"), StickyFile("b.dat")]), project=demo_project(), now=NOW
    )
    handle_request(
        work_request(host, file_infos=[StickyFile("a.dat"), StickyFile("c.dat", status=0)]),
        project=demo_project(),
        now=NOW + 1,
    )
    assert sorted(HostFile.objects.values_list("host_id", "name")) == sorted([(host.pk, "a.dat"), (other.pk, "b.dat")])


def test_a_gpu_request_that_asks_no_seconds_gets_no_gpu_job(project):
    from backend.daemons.scheduler import GpuRequest

    AppVersionFactory(app=project.app, version_num=100, plan_class="cuda", gpu_type="NVIDIA", gpu_usage=1.0, flops=1e9)
    project.version.delete()
    project.result(project.workunit())
    request = work_request(
        project.host(), cpu_req_secs=10.0, gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e12)]
    )
    assert sent(handle_request(request, project=demo_project(), now=NOW)) == []


def test_a_request_updates_the_hosts_cpu_count(project):
    from backend.models import Host

    host = project.host(p_ncpus=1)
    request = work_request(host, cpu_req_secs=0)
    request.host_info.p_ncpus = 6
    handle_request(request, project=demo_project(), now=NOW)
    assert Host.objects.get(pk=host.pk).p_ncpus == 6


def test_by_default_the_transitioner_leaves_a_validate_errors_outputs_on_disk(project):
    # transitioner.cpp: only CLIENT_ERROR and validated SUCCESS outputs are deleted
    from backend.models import AssimilateState

    wu = project.workunit(transition_time=NOW - 1, assimilate_state=AssimilateState.DONE)
    canonical = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, validate_state=ValidateState.VALID
    )
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical)
    broken = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.VALIDATE_ERROR, validate_state=ValidateState.INVALID
    )
    transitioner.run_once(project=demo_project(), now=NOW, batch_size=10)
    assert Result.objects.get(pk=broken.pk).file_delete_state == FileDeleteState.INIT
    assert Result.objects.get(pk=canonical.pk).file_delete_state == FileDeleteState.READY
