"""Locality scheduling rules (reference/server.md §3.10, seed 004, BOINC's
sched/sched_locality.cpp) not pinned elsewhere: a file's results are only those a scheduler
may send, and a file still without work after the wait for the on-demand generator is marked
as such (rule 7)."""

import pytest

from backend.models import Workunit
from tests.world.test_locality import ask, make_results, sent_files
from world import locality
from world.locality import LocalityConfig
from world.models import LocalityTrigger


@pytest.fixture
def app(project):
    project.app.locality_scheduling = True
    project.app.save()
    locality.create_data_files(project.app, ["fa", "fb"], nbytes=10**6)
    return project.app


def test_a_held_files_result_of_a_workunit_with_an_error_is_not_sent(app, project):
    [broken] = make_results(project, "fa", 1)
    Workunit.objects.filter(pk=broken.workunit_id).update(error_mask=1)
    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=0))
    assert sent_files(reply) == []
    [fine] = make_results(project, "fa", 1, start=1)
    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=0))
    assert [job.name for job in reply.results] == [fine.name]


def test_a_file_still_without_work_after_the_wait_is_marked_no_work(app, project):
    waits = []

    def wait(file_name, *, now, seconds):
        waits.append(file_name)          # the generator makes nothing meanwhile

    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=5), wait=wait)
    assert waits == ["fa"] and sent_files(reply) == []
    trigger = LocalityTrigger.objects.get(file_name="fa")
    assert (trigger.need_work, trigger.no_work) == (True, True)


def test_making_work_for_a_file_clears_its_no_work_mark_and_making_none_sets_it(app, project):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work=True)
    assert locality.make_file_work(app, "fa", now=0, per_file=3, at_most=2) == 2
    trigger = LocalityTrigger.objects.get(file_name="fa")
    assert (trigger.no_work, trigger.no_work_available) == (False, False)
    assert locality.make_file_work(app, "fa", now=1, per_file=3) == 1
    trigger.refresh_from_db()
    assert (trigger.no_work, trigger.no_work_available) == (False, True)
    assert locality.make_file_work(app, "fa", now=2, per_file=3) == 0
    trigger.refresh_from_db()
    assert (trigger.no_work, trigger.no_work_available) == (True, True)


def test_data_files_can_be_added_in_several_batches(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10)
    assert LocalityTrigger.objects.filter(file_name="fc").exists()


def test_a_request_filled_by_its_job_limit_looks_at_no_further_file(app, project):
    from backend.daemons.scheduler import SchedulerConfig, StickyFile, handle_request
    from tests.backend.conftest import NOW, work_request
    from world.locality import configured

    make_results(project, "fa", 2)
    request = work_request(project.host(), file_infos=[StickyFile("fa"), StickyFile("fb")])
    with configured(LocalityConfig(sorted_order=True, wait_period=0)):
        reply = handle_request(request, now=NOW, config=SchedulerConfig(max_wus_to_send=1))
    assert sent_files(reply) == ["fa"]
    # fb, which has no work, was never looked at: no trigger for the generator
    assert not LocalityTrigger.objects.get(file_name="fb").need_work


def test_the_fallback_scan_stops_at_its_limit_of_files_in_name_order(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10)
    for name in ("fc", "fa", "fb"):
        make_results(project, name, 1)
    assert locality.fallback_files([app.pk], exclude=set(), limit=2) == ["fa", "fb"]
    assert locality.fallback_files([app.pk], exclude={"fa"}, limit=2) == ["fb", "fc"]


def test_one_more_workunit_short_of_the_share_leaves_work_available(app, project):
    from backend.models import File, FileDeleteState

    assert locality.make_file_work(app, "fa", now=0, per_file=5, at_most=1) == 1
    assert not LocalityTrigger.objects.get(file_name="fa").no_work_available
    # a deleted file gets no more work, whatever its share: no work available
    File.objects.filter(name="fb").update(file_delete_state=FileDeleteState.DONE)
    assert locality.make_file_work(app, "fb", now=0, per_file=5) == 0
    trigger = LocalityTrigger.objects.get(file_name="fb")
    assert (trigger.no_work_available, trigger.no_work) == (True, True)
