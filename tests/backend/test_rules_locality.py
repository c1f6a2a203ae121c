"""Locality scheduling rules (reference/server.md §3.10, seed 004, BOINC's
sched/sched_locality.cpp) not pinned elsewhere: a file's results are only those a scheduler
may send, and a file still without work after the wait for the on-demand generator is marked
as such (rule 7)."""

import dataclasses

import pytest

from backend.daemons.scheduler import SchedulerConfig, StickyFile, handle_request
from backend.models import Result, ServerState, Workunit
from backend.server_config import ConfigError, read_config_xml
from tests.backend.conftest import NOW, work_request
from tests.world.test_locality import ask, make_results, sent_files
from world import locality
from world.locality import LocalityConfig, configured
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


# --- the options: BOINC's config.xml names and defaults (sched_config.cpp) --------------------

def test_config_xml_sets_the_locality_options_with_boincs_names_and_defaults():
    default = read_config_xml("<config/>")
    assert (default.locality_scheduling_sorted_order, default.locality_scheduling_wait_period,
            default.locality_scheduling_send_timeout, default.file_deletion_strategy,
            default.default_disk_min_free_gb) == (False, 0, 0, 0, 1.0)
    config = read_config_xml(
        "<boinc><config><locality_scheduling_sorted_order/>"
        "<locality_scheduling_wait_period>5</locality_scheduling_wait_period>"
        "<locality_scheduling_send_timeout>604800</locality_scheduling_send_timeout>"
        "<file_deletion_strategy>1</file_deletion_strategy>"
        "<default_disk_min_free_gb>0.5</default_disk_min_free_gb></config></boinc>")
    assert (config.locality_scheduling_sorted_order, config.locality_scheduling_wait_period,
            config.locality_scheduling_send_timeout, config.file_deletion_strategy,
            config.default_disk_min_free_gb) == (True, 5, 604800, 1, 0.5)
    # what a caller leaves None comes from config.xml; what it sets wins
    resolved = LocalityConfig(wait_period=0).resolved(config)
    assert (resolved.sorted_order, resolved.wait_period, resolved.send_timeout,
            resolved.delete_files) == (True, 0, 604800, True)


@pytest.mark.parametrize("xml, tag", [
    ("<locality_scheduling_send_timeout>soon</locality_scheduling_send_timeout>",
     "locality_scheduling_send_timeout"),
    ("<locality_scheduling_wait_period>-1</locality_scheduling_wait_period>",
     "locality_scheduling_wait_period"),
    ("<default_disk_min_free_gb>-2</default_disk_min_free_gb>", "default_disk_min_free_gb"),
])
def test_a_bad_locality_option_is_refused_naming_it(xml, tag):
    with pytest.raises(ConfigError, match=tag):
        read_config_xml(f"<config>{xml}</config>")


@pytest.mark.django_db
def test_the_status_page_shows_the_locality_options(client, settings, tmp_path):
    (tmp_path / "config.xml").write_text(
        "<config><locality_scheduling_send_timeout>604800</locality_scheduling_send_timeout>"
        "<file_deletion_strategy>1</file_deletion_strategy></config>")
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    html = client.get("/project/status/").content.decode()
    section = html[html.index('data-testid="server-options"'):]
    for name, value in [("locality_scheduling_send_timeout", "604800 s"),
                        ("locality_scheduling_sorted_order", "no"),
                        ("locality_scheduling_wait_period", "0 s"),
                        ("file_deletion_strategy", "1"),
                        ("default_disk_min_free_gb", "1 GB")]:
        row = section[section.index(f'data-option="{name}"'):]
        assert value in row[:row.index("</tr>")], name


def config_xml_request(host, files, config, **fields):
    request = work_request(host, file_infos=[StickyFile(name) for name in files], **fields)
    return handle_request(request, now=NOW, config=config)


def test_the_scheduler_takes_sorted_order_from_config_xml(app, project):
    make_results(project, "fa", 1)
    make_results(project, "fb", 1)
    config = SchedulerConfig(locality_scheduling_sorted_order=True, max_wus_to_send=1)
    for seqno in range(4):  # at random, fb would come first about half the time
        reply = config_xml_request(project.host(), ["fb", "fa"], config, rpc_seqno=seqno)
        assert sent_files(reply) == ["fa"]
        Result.objects.filter(workunit__name__startswith="fa__").update(
            server_state=ServerState.UNSENT, host=None, user=None)


@pytest.mark.parametrize("strategy, deleted", [(0, False), (1, True)])
def test_file_deletion_strategy_1_deletes_a_held_file_left_without_work(app, project, strategy,
                                                                         deleted):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True)
    reply = config_xml_request(project.host(), ["fa"],
                               SchedulerConfig(file_deletion_strategy=strategy))
    assert ("fa" in reply.delete_file_infos) is deleted


# --- rule 10: old work first (sched_locality.cpp send_work_locality, send_old_work) -----------

WEEK = 7 * 86400
FAST, SLOW = 200_000.0, 100_000.0  # bytes/s: old work needs more than 100,000


def aged(results, create_time):
    """``results`` created at ``create_time``, every other result now."""
    Result.objects.update(create_time=NOW)
    Result.objects.filter(pk__in=[r.pk for r in results]).update(create_time=create_time)


def ask_with(project, files, *, bwdown, jobs, timeout=WEEK, host=None, **config_fields):
    """A request for ``jobs`` one-hour jobs (rsc_fpops_est 3600e9 on 1 GFLOPS) from a host
    downloading at ``bwdown`` bytes/s, under config.xml's ``timeout``."""
    request = work_request(host or project.host(), file_infos=[StickyFile(n) for n in files],
                           cpu_req_secs=jobs * 3600.0 - 1, cpu_req_instances=0.0)
    request.host_info = dataclasses.replace(request.host_info, n_bwdown=bwdown)
    config = SchedulerConfig(locality_scheduling_send_timeout=timeout, **config_fields)
    return handle_request(request, now=NOW, config=config)


def test_a_fast_host_gets_the_oldest_result_first_then_more_of_its_file(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    [old] = make_results(project, "fc", 1)
    newer = make_results(project, "fc", 2, start=1)
    make_results(project, "fa", 3)
    aged([old], NOW - WEEK - 3600)
    reply = ask_with(project, ["fa"], bwdown=FAST, jobs=3)
    # the old result, then its file's other results (rules 4-6) before the held file's
    assert [job.name for job in reply.results] == [old.name] + [r.name for r in newer]


def test_a_slow_host_gets_its_own_files_work_not_the_old_work(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    old = make_results(project, "fc", 1)
    make_results(project, "fa", 1)
    aged(old, NOW - WEEK - 3600)
    reply = ask_with(project, ["fa"], bwdown=SLOW, jobs=1)
    assert sent_files(reply) == ["fa"]


def test_old_work_is_off_without_a_send_timeout(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    old = make_results(project, "fc", 1)
    make_results(project, "fa", 1)
    aged(old, NOW - 10 * WEEK)
    reply = ask_with(project, ["fa"], bwdown=FAST, jobs=1, timeout=0)
    assert sent_files(reply) == ["fa"]


@pytest.mark.parametrize("offset, old", [(-1, True), (0, False)])
def test_old_means_created_before_the_timeout_rounded_down_to_the_hour(app, project, offset,
                                                                       old):
    timeout = WEEK + 1800  # now - timeout lies half an hour past an hour
    before = (NOW - timeout) // 3600 * 3600
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    candidate = make_results(project, "fc", 1)
    make_results(project, "fa", 1)
    aged(candidate, before + offset)
    reply = ask_with(project, ["fa"], bwdown=FAST, jobs=1, timeout=timeout)
    assert sent_files(reply) == (["fc"] if old else ["fa"])


def test_an_old_result_this_volunteer_already_has_a_replica_of_is_not_sent(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    [old] = make_results(project, "fc", 1)
    host = project.host()
    project.result(old.workunit, server_state=ServerState.IN_PROGRESS, host=host,
                   user=host.owner)
    make_results(project, "fa", 1)
    aged([old], NOW - 2 * WEEK)
    reply = ask_with(project, ["fa"], bwdown=FAST, jobs=1, host=host)
    assert sent_files(reply) == ["fa"]
    assert Result.objects.get(pk=old.pk).server_state == ServerState.UNSENT


class Draw:
    def __init__(self, value):
        self.value = value

    def random(self):
        return self.value


@pytest.mark.parametrize("frac, window", [
    # send_new_file_work: end = now - T/2, start = end - 0.5 × frac × T; the end to the hour
    (1.0, (1_000_000 - 43_200 - 43_200, (1_000_000 - 43_200) // 3600 * 3600)),
    (0.5, (1_000_000 - 43_200 - 21_600, (1_000_000 - 43_200) // 3600 * 3600)),
    (0.0, (1_000_000 - 43_200, (1_000_000 - 43_200) // 3600 * 3600)),  # empty
])
def test_the_window_of_old_work_before_a_new_file(frac, window):
    assert locality.old_work_window(1_000_000, 86_400, Draw(frac)) == window


@pytest.mark.parametrize("age, least, most", [
    (0.6, 10, 20),  # inside the window when the draw is above 0.2: most requests
    (0.3, 0, 0),    # younger than T/2: never old work
    (1.2, 0, 0),    # older than T: never in the window, and only fast hosts get rule 10's
])
def test_a_host_with_no_file_gets_work_from_the_window_whatever_its_speed(app, project, age,
                                                                         least, most):
    # the working set is empty: only the window can send anything. Twenty requests, each its
    # own draw (a fixed host key per request, so the draws are the same every run)
    got = 0
    for key in range(20):
        Result.objects.all().delete()
        aged(make_results(project, "fa", 1, start=key), NOW - int(age * WEEK))
        with configured(LocalityConfig(seed=1), host_key=key):
            got += len(ask_with(project, [], bwdown=SLOW, jobs=1).results)
    assert least <= got <= most
