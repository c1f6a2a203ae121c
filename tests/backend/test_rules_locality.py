"""Locality scheduling rules (reference/server.md §3.10, seed 004, BOINC's
sched/sched_locality.cpp) not pinned elsewhere: a file's results are only those a scheduler
may send, and a file still without work after the wait for the on-demand generator is marked
as such (rule 7)."""

import dataclasses

import pytest

from backend.daemons import sched_locality as locality
from backend.daemons.sched_locality import LocalityConfig
from backend.daemons.sched_types import GlobalPrefs
from backend.daemons.scheduler import SchedulerConfig, StickyFile, handle_request
from backend.models import File, LocalityTrigger, Result, ServerState, Workunit
from backend.server_config import ConfigError, read_config_xml
from tests.backend.conftest import work_request
from tests.backend.test_locality import ask, make_results, sent_files
from tests.factories import NOW, AppVersionFactory, FileFactory, HostAppVersionFactory, demo_project
from tests.pages import by_testid, parse


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
        waits.append(file_name)  # the generator makes nothing meanwhile

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
    reply = handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(max_wus_to_send=1, locality_config=LocalityConfig(sorted_order=True, wait_period=0)),
    )
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
    assert (
        default.locality_scheduling_sorted_order,
        default.locality_scheduling_wait_period,
        default.locality_scheduling_send_timeout,
        default.file_deletion_strategy,
        default.default_disk_min_free_gb,
    ) == (False, 0, 0, 0, 1.0)
    config = read_config_xml(
        "<boinc><config><locality_scheduling_sorted_order/>"
        "<locality_scheduling_wait_period>5</locality_scheduling_wait_period>"
        "<locality_scheduling_send_timeout>604800</locality_scheduling_send_timeout>"
        "<file_deletion_strategy>1</file_deletion_strategy>"
        "<default_disk_min_free_gb>0.5</default_disk_min_free_gb></config></boinc>"
    )
    assert (
        config.locality_scheduling_sorted_order,
        config.locality_scheduling_wait_period,
        config.locality_scheduling_send_timeout,
        config.file_deletion_strategy,
        config.default_disk_min_free_gb,
    ) == (True, 5, 604800, 1, 0.5)
    # what a caller leaves None comes from config.xml; what it sets wins
    resolved = LocalityConfig(wait_period=0).resolved(config)
    assert (resolved.sorted_order, resolved.wait_period, resolved.send_timeout, resolved.delete_files) == (
        True,
        0,
        604800,
        True,
    )


@pytest.mark.parametrize(
    "xml, tag",
    [
        (
            "<locality_scheduling_send_timeout>soon</locality_scheduling_send_timeout>",
            "locality_scheduling_send_timeout",
        ),
        ("<locality_scheduling_wait_period>-1</locality_scheduling_wait_period>", "locality_scheduling_wait_period"),
        ("<default_disk_min_free_gb>-2</default_disk_min_free_gb>", "default_disk_min_free_gb"),
    ],
)
def test_a_bad_locality_option_is_refused_naming_it(xml, tag):
    with pytest.raises(ConfigError, match=tag):
        read_config_xml(f"<config>{xml}</config>")


def test_a_callers_locality_config_is_a_locality_config_and_never_read_from_config_xml():
    with pytest.raises(ValueError, match="locality_config"):
        SchedulerConfig(locality_config={"sorted_order": True})
    assert read_config_xml("<config><locality_config>1</locality_config></config>").locality_config is None


@pytest.mark.django_db
def test_the_status_page_shows_each_of_boincs_own_behaviours_an_admin_can_turn_on(client, settings, tmp_path):
    names = (
        "boinc_locality_limits",
        "boinc_locality_full_delay_bound",
        "boinc_locality_full_disk_bound",
        "boinc_committed_never_reliable",
    )
    shown = server_options_shown(client)
    assert [shown[name] for name in names] == ["no"] * len(names)
    (tmp_path / "config.xml").write_text("<config>" + "".join(f"<{n}>1</{n}>" for n in names) + "</config>")
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    shown = server_options_shown(client)
    assert [shown[name] for name in names] == ["yes"] * len(names)


@pytest.mark.django_db
def test_the_status_page_shows_the_locality_options(client, settings, tmp_path):
    (tmp_path / "config.xml").write_text(
        "<config><locality_scheduling_send_timeout>604800</locality_scheduling_send_timeout>"
        "<file_deletion_strategy>1</file_deletion_strategy></config>"
    )
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    options = server_options_shown(client)
    for name, value in [
        ("locality_scheduling_send_timeout", "604800 s"),
        ("locality_scheduling_sorted_order", "no"),
        ("locality_scheduling_wait_period", "0 s"),
        ("file_deletion_strategy", "1"),
        ("default_disk_min_free_gb", "1 GB"),
    ]:
        assert options[name] == value, name


def server_options_shown(client):
    """The status page's configuration table: option name -> the value shown."""
    section = by_testid(parse(client.get("/project/status/")), "server-options")
    return {tr["data-option"]: tr.find_all("td")[1].get_text(strip=True) for tr in section.select("tr[data-option]")}


def config_xml_request(host, files, config, **fields):
    request = work_request(host, file_infos=[StickyFile(name) for name in files], **fields)
    return handle_request(request, project=demo_project(), now=NOW, config=config)


def test_the_scheduler_takes_sorted_order_from_config_xml(app, project):
    make_results(project, "fa", 1)
    make_results(project, "fb", 1)
    config = SchedulerConfig(locality_scheduling_sorted_order=True, max_wus_to_send=1)
    for seqno in range(4):  # at random, fb would come first about half the time
        reply = config_xml_request(project.host(), ["fb", "fa"], config, rpc_seqno=seqno)
        assert sent_files(reply) == ["fa"]
        Result.objects.filter(workunit__name__startswith="fa__").update(
            server_state=ServerState.UNSENT, host=None, user=None
        )


@pytest.mark.parametrize("strategy, deleted", [(0, False), (1, True)])
def test_file_deletion_strategy_1_deletes_a_held_file_left_without_work(app, project, strategy, deleted):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True)
    reply = config_xml_request(project.host(), ["fa"], SchedulerConfig(file_deletion_strategy=strategy))
    assert ("fa" in reply.delete_file_infos) is deleted


# --- rules 7 and 9: BOINC's (the default) and seed 004's (the seed004_ options) -------------

BOINC_RULES, SEED_RULES = "BOINC", "seed 004"


def rules(mode, **fields):
    seed = mode == SEED_RULES
    return LocalityConfig(scan_only_excluded=seed, delete_only_finished=seed, **fields)


def exclude_for(project, host, result):
    """``result``'s workunit gets an unsent twin; ``result`` goes to another host of ``host``'s
    volunteer, so the twin is excluded for the volunteer (rule 5)."""
    twin = project.result(result.workunit)
    Result.objects.filter(pk=result.pk).update(
        server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner
    )
    return twin


@pytest.mark.parametrize(
    "situation, boinc, seed",
    [
        # sched_locality.cpp send_work_locality: nothing sent and work still needed -> delete
        ("excluded", True, False),  # other volunteers' result of it is still unsent
        ("more can be made", True, False),  # the generator may make more (no_work_available off)
        ("finished", True, True),  # no more work, none unsent: both delete
        ("sent one", False, False),  # a file that gave a job stays
    ],
)
@pytest.mark.parametrize("mode", [BOINC_RULES, SEED_RULES])
def test_rule_7_which_held_file_is_named_for_deletion(app, project, situation, boinc, seed, mode):
    host = project.host()
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=situation != "more can be made")
    if situation == "excluded":
        [mine] = make_results(project, "fa", 1)
        twin = exclude_for(project, host, mine)
    elif situation == "sent one":
        make_results(project, "fa", 1)
    reply = ask(host, files=["fa"], config=rules(mode, wait_period=0, delete_files=True), cpu_req_secs=3 * 3600.0)
    assert ("fa" in reply.delete_file_infos) is (boinc if mode == BOINC_RULES else seed)
    assert sent_files(reply) == (["fa"] if situation == "sent one" else [])
    if situation == "excluded":
        assert Result.objects.get(pk=twin.pk).server_state == ServerState.UNSENT


@pytest.mark.parametrize("mode", [BOINC_RULES, SEED_RULES])
def test_rule_7_without_file_deletion_strategy_1_no_held_file_is_deleted(app, project, mode):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True)
    reply = ask(project.host(), files=["fa"], config=rules(mode, wait_period=0, delete_files=False))
    assert reply.delete_file_infos == []


def test_rule_7_a_held_file_not_looked_at_once_the_request_is_met_stays(app, project):
    # fa fills the one-job request: fb, which has nothing, is not looked at and not deleted
    make_results(project, "fa", 1)
    request = work_request(project.host(), file_infos=[StickyFile("fa"), StickyFile("fb")])
    reply = handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(
            max_wus_to_send=1, locality_config=rules(BOINC_RULES, sorted_order=True, wait_period=0, delete_files=True)
        ),
    )
    assert (sent_files(reply), reply.delete_file_infos) == (["fa"], [])


def test_rule_7_a_host_at_its_limit_of_jobs_in_progress_keeps_its_files(app, project):
    # sched_send.cpp work_needed: at max_wus_in_progress no more work is needed, so fb,
    # looked at after fa's job, is not deleted (and nothing is scanned)
    make_results(project, "fa", 2)
    host = project.host()
    config = SchedulerConfig(max_wus_in_progress=1, file_deletion_strategy=1, locality_scheduling_sorted_order=True)
    reply = config_xml_request(host, ["fa", "fb"], config, cpu_req_secs=6 * 3600.0)
    assert (sent_files(reply), reply.delete_file_infos) == (["fa"] * host.p_ncpus, [])


@pytest.mark.parametrize(
    "mode, expected",
    [
        # send_new_file_work_deterministic: no working-set file, so the scan starts at the first
        # file name and goes on while work is needed
        (BOINC_RULES, ["fa", "fb", "fc", "fc"]),
        (SEED_RULES, ["fa"]),  # an empty working set leaves the rest unfilled
    ],
)
def test_rule_9_a_host_whose_file_gives_too_little_with_an_empty_working_set(app, project, mode, expected):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    make_results(project, "fc", 2)
    make_results(project, "fb", 1)
    make_results(project, "fa", 1)
    LocalityTrigger.objects.update(no_work_available=True)
    reply = ask(project.host(), files=["fa"], config=rules(mode, wait_period=0), cpu_req_secs=6 * 3600.0)
    assert sent_files(reply) == expected


@pytest.mark.parametrize(
    "mode, expected",
    [
        # the scan starts at the working-set file, goes to the last name and round to the first
        (BOINC_RULES, ["fb", "fc", "fa"]),
        (SEED_RULES, ["fb"]),  # fb filled part of the request and is not excluded: no scan
    ],
)
def test_rule_9_the_scan_starts_at_the_working_set_file(app, project, mode, expected):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    for name in ("fa", "fb", "fc"):
        make_results(project, name, 1)
    LocalityTrigger.objects.update(no_work_available=True)
    LocalityTrigger.objects.filter(file_name="fb").update(in_working_set=True)
    reply = ask(project.host(), config=rules(mode, wait_period=0, sorted_order=True), cpu_req_secs=6 * 3600.0)
    assert sent_files(reply) == expected


@pytest.mark.parametrize("mode", [BOINC_RULES, SEED_RULES])
def test_rule_9_an_excluded_working_set_file_goes_on_to_the_scan_in_both(app, project, mode):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    host = project.host()
    [taken] = make_results(project, "fa", 1)
    exclude_for(project, host, taken)
    make_results(project, "fc", 1)
    make_results(project, "fb", 1)
    LocalityTrigger.objects.update(no_work_available=True)
    LocalityTrigger.objects.filter(file_name="fa").update(in_working_set=True)
    reply = ask(host, config=rules(mode, wait_period=0, sorted_order=True), cpu_req_secs=6 * 3600.0)
    assert sent_files(reply) == ["fb", "fc"]


def test_the_scan_takes_files_in_their_results_name_order():
    """BOINC's scan orders result names, so ``FILE__`` orders the files: "f2__" < "f__"."""
    assert sorted(["f", "f2", "e"], key=lambda name: name + locality.SEPARATOR) == ["e", "f2", "f"]


@pytest.mark.django_db
def test_the_seed_options_are_read_from_config_xml_and_shown(client, settings, tmp_path):
    default = read_config_xml("<config/>")
    assert (default.seed004_scan_only_excluded, default.seed004_delete_only_finished) == (False, False)
    (tmp_path / "config.xml").write_text(
        "<config><seed004_scan_only_excluded/><seed004_delete_only_finished>1</seed004_delete_only_finished></config>"
    )
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    config = read_config_xml((tmp_path / "config.xml").read_text())
    resolved = LocalityConfig().resolved(config)
    assert (resolved.scan_only_excluded, resolved.delete_only_finished) == (True, True)
    assert LocalityConfig(scan_only_excluded=False).resolved(config).scan_only_excluded is False
    options = server_options_shown(client)
    for name in ("seed004_scan_only_excluded", "seed004_delete_only_finished"):
        assert options[name] == "yes", name


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
    request = work_request(
        host or project.host(),
        file_infos=[StickyFile(n) for n in files],
        cpu_req_secs=jobs * 3600.0 - 1,
        cpu_req_instances=0.0,
    )
    request.host_info = dataclasses.replace(request.host_info, n_bwdown=bwdown)
    config = SchedulerConfig(locality_scheduling_send_timeout=timeout, **config_fields)
    return handle_request(request, project=demo_project(), now=NOW, config=config)


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
def test_old_means_created_before_the_timeout_rounded_down_to_the_hour(app, project, offset, old):
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
    project.result(old.workunit, server_state=ServerState.IN_PROGRESS, host=host, user=host.owner)
    make_results(project, "fa", 1)
    aged([old], NOW - 2 * WEEK)
    reply = ask_with(project, ["fa"], bwdown=FAST, jobs=1, host=host)
    assert sent_files(reply) == ["fa"]
    assert Result.objects.get(pk=old.pk).server_state == ServerState.UNSENT


def test_an_old_job_with_no_app_version_leaves_the_search_to_go_on_to_the_held_files(app, project):
    # sched_locality.cpp send_work_locality logs send_old_work's ERR_NO_APP_VERSION and goes
    # on to the host's files: fa sends nothing while work is wanted and is named for
    # deletion; the scan then meets the old job's file again, whose job still finds no
    # version (possibly_send_result), and the search ends with nothing sent
    app.homogeneous_app_version = True
    app.save()
    windows = AppVersionFactory(app=app, version_num=100, platform="windows_x86_64", flops=1e9)
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    [old] = make_results(project, "fc", 1)
    Workunit.objects.filter(pk=old.workunit_id).update(app_version=windows)
    aged([old], NOW - 2 * WEEK)
    reply = ask_with(
        project, ["fa"], bwdown=FAST, jobs=1, file_deletion_strategy=1, locality_scheduling_sorted_order=True
    )
    assert (sent_files(reply), reply.delete_file_infos) == ([], ["fa"])
    assert Result.objects.get(pk=old.pk).server_state == ServerState.UNSENT


class Draw:
    def __init__(self, value):
        self.value = value

    def random(self):
        return self.value


@pytest.mark.parametrize(
    "frac, window",
    [
        # send_new_file_work: end = now - T/2, start = end - 0.5 × frac × T; the end to the hour
        (1.0, (1_000_000 - 43_200 - 43_200, (1_000_000 - 43_200) // 3600 * 3600)),
        (0.5, (1_000_000 - 43_200 - 21_600, (1_000_000 - 43_200) // 3600 * 3600)),
        (0.0, (1_000_000 - 43_200, (1_000_000 - 43_200) // 3600 * 3600)),  # empty
    ],
)
def test_the_window_of_old_work_before_a_new_file(frac, window):
    assert locality.old_work_window(1_000_000, 86_400, Draw(frac)) == window


@pytest.mark.parametrize(
    "age, least, most",
    [
        (0.6, 10, 20),  # inside the window when the draw is above 0.2: most requests
        (0.3, 0, 0),  # younger than T/2: never old work
        (1.2, 0, 0),  # older than T: never in the window, and only fast hosts get rule 10's
    ],
)
def test_a_host_with_no_file_gets_work_from_the_window_whatever_its_speed(app, project, age, least, most):
    # the working set is empty and, with seed 004's rule 9, nothing is scanned: only the
    # window can send anything. Twenty requests, each its own draw (a fixed host key per
    # request, so the draws are the same every run)
    got = 0
    for key in range(20):
        Result.objects.all().delete()
        aged(make_results(project, "fa", 1, start=key), NOW - int(age * WEEK))
        config = LocalityConfig(seed=1, scan_only_excluded=True, host_key=key)
        got += len(ask_with(project, [], bwdown=SLOW, jobs=1, locality_config=config).results)
    assert least <= got <= most


# --- rule 11: disk (sched_send.cpp max_allowable_disk, sched_check.cpp check_disk,
# sched_locality.cpp decrement_disk_space_locality, delete_file_from_host) ---------------------

GIGA = 2**30


@pytest.mark.parametrize(
    "host, prefs, config_min_free, expected",
    [
        # no d_boinc_used_total: d_free less the larger min free (config.xml's 1 GB by default)
        ((100 * GIGA, 10 * GIGA, 0), (0, 0, 0), 1.0, (9 * GIGA, "min_free")),
        ((100 * GIGA, 10 * GIGA, 0), (5, 50, 2), 1.0, (8 * GIGA, "min_free")),
        # with it: the least of d_free - min free, pct of d_total - used, max_used - used
        ((100 * GIGA, 10 * GIGA, GIGA), (5, 0, 0), 1.0, (4 * GIGA, "max_used")),
        ((100 * GIGA, 10 * GIGA, GIGA), (0, 5, 0), 1.0, (4 * GIGA, "max_frac")),
        ((100 * GIGA, 10 * GIGA, GIGA), (20, 50, 0), 0.5, (9.5 * GIGA, "min_free")),
        ((100 * GIGA, 10 * GIGA, 6 * GIGA), (5, 0, 0), 1.0, (-GIGA, "max_used")),  # short
    ],
)
def test_max_allowable_disk(host, prefs, config_min_free, expected):
    from backend.daemons.sched_send import disk_allowance, max_allowable_disk
    from backend.daemons.sched_types import GlobalPrefs, HostInfo, SchedulerRequest

    d_total, d_free, used = host
    gb, pct, min_free = prefs
    request = SchedulerRequest(
        host_info=HostInfo(d_total=d_total, d_free=d_free, d_boinc_used_total=used),
        global_prefs=GlobalPrefs(disk_max_used_gb=gb, disk_max_used_pct=pct, disk_min_free_gb=min_free),
    )
    config = SchedulerConfig(default_disk_min_free_gb=config_min_free)
    assert disk_allowance(request, config) == expected
    assert max_allowable_disk(request, config) == max(expected[0], 0)


def disk_request(host, files, *, max_used_gb, used=0.0, jobs=5):
    """A request whose disk allowance is max_used_gb GiB less ``used``: d_free and d_total
    are far larger, so disk_max_used_gb is the bound."""
    request = work_request(
        host,
        file_infos=[StickyFile(n) for n in files],
        cpu_req_secs=jobs * 3600.0 - 1,
        cpu_req_instances=0.0,
        global_prefs=GlobalPrefs(disk_max_used_gb=max_used_gb),
    )
    request.host_info = dataclasses.replace(
        request.host_info, d_total=1e13, d_free=1e13, d_boinc_used_total=used or 1.0
    )
    return request


@pytest.mark.parametrize("full_bound, sent", [(False, ["fa", "fa"]), (True, ["fa"])])
def test_each_job_of_a_held_file_takes_its_disk_bound_less_the_files_size(app, project, full_bound, sent):
    # fa is 10**6 bytes, each workunit's rsc_disk_bound 1e9. Room for 2e9 - 1e6: the first
    # job leaves 1e9 (its bound less the file it shares), the second fits exactly (check_disk
    # refuses only more than is left), the third does not. Without the file's size taken off
    # the second would not fit: BOINC's possibly_send_result takes the whole bound off, as
    # the option boinc_locality_full_disk_bound does (docs/server-fidelity.md, BOINC defect 3;
    # the differential's seed 9404 locality case 145)
    make_results(project, "fa", 3)
    request = disk_request(project.host(), ["fa"], max_used_gb=2, used=2 * GIGA - (2e9 - 10**6))
    config = SchedulerConfig(boinc_locality_full_disk_bound=full_bound)
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert sent_files(reply) == sent
    assert reply.delete_file_infos == []  # something was sent


def test_a_new_files_first_job_takes_its_whole_bound_and_later_ones_less(app, project):
    # fb is not held: its first job takes 1e9, the next (the reply brings fb) 1e9 - 1e6
    make_results(project, "fb", 3)
    LocalityTrigger.objects.filter(file_name="fb").update(in_working_set=True)
    request = disk_request(project.host(), [], max_used_gb=2, used=2 * GIGA - (2e9 - 10**6))
    assert sent_files(handle_request(request, project=demo_project(), now=NOW)) == ["fb"]
    request = disk_request(project.host(), [], max_used_gb=2, used=2 * GIGA - 2e9)
    assert sent_files(handle_request(request, project=demo_project(), now=NOW)) == ["fb", "fb"]


def test_a_host_short_of_disk_is_told_to_delete_the_file_at_its_id_modulo(app, project):
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    for name in ("fa", "fb", "fc"):
        make_results(project, name, 1)
    files = ["fc", "fa", "fb"]  # the order the client lists them in
    host = project.host()
    reply = handle_request(disk_request(host, files, max_used_gb=1, used=0.5 * GIGA), project=demo_project(), now=NOW)
    name = files[host.pk % 3]
    assert reply.results == []
    assert name in reply.delete_file_infos
    # check_disk's notice: 0.5 GiB left, 1e9 bytes needed (MB = 2^20 bytes)
    assert (
        "uppercase needs 441.67MB more disk space.  You currently have 512.00 MB available and it needs 953.67 MB."
    ) in [m.text for m in reply.messages if m.priority == "notice"]
    assert [(m.text, m.priority) for m in reply.messages if "BOINC will" in m.text] == [
        (f"BOINC will delete file {name} when no longer needed", "low")
    ]
    assert reply.request_delay >= 4 * 3600
    # no file is named for deletion on the rule 7 grounds: the search stopped at the disk
    assert reply.delete_file_infos == [name]
    assert not LocalityTrigger.objects.filter(need_work=True).exists()


@pytest.mark.parametrize(
    "max_used_gb, used, text",
    [
        (
            1,
            0.5 * GIGA,
            "Not enough disk space (only 536.9 MB free for BOINC). Review preferences for maximum disk space used.",
        ),
        (
            1,
            2 * GIGA,
            "No disk space (YOU must free -0.0 MB before BOINC gets space). "
            "Review preferences for maximum disk space used.",
        ),
    ],
)
def test_a_host_short_of_disk_with_no_file_to_delete_is_told_why(app, project, max_used_gb, used, text):
    make_results(project, "fa", 1)
    LocalityTrigger.objects.filter(file_name="fa").update(in_working_set=True)
    reply = handle_request(
        disk_request(project.host(), [], max_used_gb=max_used_gb, used=used), project=demo_project(), now=NOW
    )
    assert reply.results == [] and reply.delete_file_infos == []
    assert [(m.text, m.priority) for m in reply.messages if m.text.startswith(("Not enough disk", "No disk"))] == [
        (text, "notice")
    ]
    assert reply.request_delay >= 3600


def test_a_request_that_says_nothing_of_its_disk_has_no_disk_check(app, project):
    make_results(project, "fa", 2)
    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=0))
    assert sent_files(reply) == ["fa", "fa"]
    assert reply.delete_file_infos == []


def test_the_request_carries_bwdown_disk_usage_and_the_disk_preferences():
    from protocol.xml_request import parse_request

    body = (
        b"<scheduler_request><authenticator>x</authenticator>"
        b"<host_info><d_total>1e12</d_total><d_free>5e11</d_free></host_info>"
        b"<net_stats><bwdown>250000</bwdown></net_stats>"
        b"<disk_usage><d_boinc_used_total>3e9</d_boinc_used_total></disk_usage>"
        b"<global_preferences><disk_max_used_gb>10</disk_max_used_gb>"
        b"<disk_max_used_pct>50</disk_max_used_pct></global_preferences>"
        b"<working_global_preferences><disk_max_used_gb>20</disk_max_used_gb>"
        b"<disk_min_free_gb>2</disk_min_free_gb></working_global_preferences>"
        b"</scheduler_request>"
    )
    request = parse_request(body).request
    assert (request.host_info.n_bwdown, request.host_info.d_boinc_used_total) == (2.5e5, 3e9)
    # the working preferences win whole over the master ones (handle_request.cpp)
    prefs = request.global_prefs
    assert (prefs.disk_max_used_gb, prefs.disk_max_used_pct, prefs.disk_min_free_gb) == (20, 0, 2)
    assert request.models_disk


# --- rule 12: no_delete (file_deleter.cpp wu_delete_files, result_delete_files) --------------


def test_the_file_deleter_keeps_files_marked_no_delete(project):
    from backend.daemons import file_deleter
    from backend.daemons.hierarchy import download_path, upload_path
    from backend.models import File, FileDeleteState

    kept = FileFactory(name="kept.dat", no_delete=True)
    gone = FileFactory(name="gone.dat")
    wu = project.workunit(file_delete_state=FileDeleteState.READY)
    wu.input_files.add(kept, gone)
    result = project.result(wu, server_state=ServerState.OVER, file_delete_state=FileDeleteState.READY)
    out_kept = FileFactory(name="out_kept", result=result, no_delete=True)
    out_gone = FileFactory(name="out_gone", result=result)
    for path in (
        download_path(demo_project(), "kept.dat"),
        download_path(demo_project(), "gone.dat"),
        upload_path(demo_project(), "out_kept"),
        upload_path(demo_project(), "out_gone"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8)
    assert download_path(demo_project(), "kept.dat").exists() and upload_path(demo_project(), "out_kept").exists()
    assert (
        not download_path(demo_project(), "gone.dat").exists() and not upload_path(demo_project(), "out_gone").exists()
    )
    wu.refresh_from_db()
    result.refresh_from_db()
    assert (wu.file_delete_state, result.file_delete_state) == (FileDeleteState.DONE,) * 2
    states = dict(File.objects.values_list("name", "file_delete_state"))
    assert (states["kept.dat"], states["out_kept"]) == (FileDeleteState.INIT,) * 2
    assert (states["gone.dat"], states["out_gone"]) == (FileDeleteState.DONE,) * 2
    assert out_kept.pk and out_gone.pk


def test_a_no_delete_file_stays_on_the_server_so_no_host_is_told_it_is_gone(app, project):
    from backend.daemons import file_deleter
    from backend.models import File, FileDeleteState

    File.objects.filter(name="fa").update(no_delete=True)
    wu = project.workunit(name="fa__0", file_delete_state=FileDeleteState.READY)
    wu.input_files.add(File.objects.get(name="fa"))
    file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8)
    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=0), dont_send_work=True)
    assert reply.delete_file_infos == []


def test_the_scheduler_may_still_name_a_no_delete_file_for_a_host_to_delete(app, project):
    # BOINC's scheduler does not read <no_delete/>: only the server's copy is kept
    File.objects.filter(name="fa").update(no_delete=True)
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True)
    reply = ask(project.host(), files=["fa"], config=LocalityConfig(wait_period=0, delete_files=True))
    assert reply.delete_file_infos == ["fa"]


# --- rule 13: homogeneous redundancy and app version (sched_check.cpp wu_is_infeasible_fast,
# sched_send.cpp update_wu_on_send) -------------------------------------------------------------

XEON = ("GenuineIntel", "Intel(R) Xeon(R) CPU E5-2670")
CORE = ("GenuineIntel", "Intel(R) Core(TM) i7-8700")


def hr_ask(host, files, cpu, os_name="Linux", jobs=1):
    request = work_request(
        host, file_infos=[StickyFile(n) for n in files], cpu_req_secs=jobs * 3600.0 - 1, cpu_req_instances=0.0
    )
    request.host_info = dataclasses.replace(request.host_info, os_name=os_name, p_vendor=cpu[0], p_model=cpu[1])
    return handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(locality_config=LocalityConfig(wait_period=0, sorted_order=True)),
    )


@pytest.mark.parametrize(
    "os_name, cpu, sent",
    [
        ("Linux", XEON, True),  # the committed class: Linux (256) + Xeon (11)
        ("Linux", CORE, False),  # another CPU family
        ("Microsoft Windows 10", XEON, False),  # another OS
    ],
)
def test_a_committed_locality_result_goes_only_to_a_host_of_its_class(app, project, os_name, cpu, sent):
    app.homogeneous_redundancy = 1
    app.save()
    [result] = make_results(project, "fa", 1)
    Workunit.objects.filter(pk=result.workunit_id).update(hr_class=256 + 11)
    reply = hr_ask(project.host(), ["fa"], cpu, os_name)
    assert bool(reply.results) is sent
    assert Workunit.objects.get(pk=result.workunit_id).hr_class == 256 + 11


def test_the_first_locality_send_commits_the_class_and_the_replica_follows_it(app, project):
    app.homogeneous_redundancy = 1
    app.save()
    [first] = make_results(project, "fa", 1)
    replica = project.result(first.workunit)
    assert sent_files(hr_ask(project.host(), ["fa"], CORE)) == ["fa"]
    assert Workunit.objects.get(pk=first.workunit_id).hr_class == 256 + 21
    assert hr_ask(project.host(), ["fa"], XEON).results == []
    assert [job.name for job in hr_ask(project.host(), ["fa"], CORE).results] == [replica.name]


def test_a_locality_result_committed_to_an_app_version_goes_with_it(app, project):
    app.homogeneous_app_version = True
    app.save()
    old = AppVersionFactory(app=app, version_num=90, flops=1e9)
    windows = AppVersionFactory(app=app, version_num=100, platform="windows_x86_64", flops=1e9)
    [mine, theirs] = make_results(project, "fa", 2)
    Workunit.objects.filter(pk=mine.workunit_id).update(app_version=old)
    Workunit.objects.filter(pk=theirs.workunit_id).update(app_version=windows)
    reply = hr_ask(project.host(), ["fa"], XEON, jobs=2)
    assert [(job.name, job.app_version.version_num) for job in reply.results] == [(mine.name, 90)]


def test_a_result_committed_to_a_version_the_host_lacks_ends_the_locality_search(app, project):
    # possibly_send_result: get_app_version finds no version, ERR_NO_APP_VERSION, and
    # send_results_for_file and send_work_locality give up: nothing after it is sent and the
    # file is not named for deletion

    app.homogeneous_app_version = True
    app.save()
    windows = AppVersionFactory(app=app, version_num=100, platform="windows_x86_64", flops=1e9)
    [theirs, _] = make_results(project, "fa", 2)
    make_results(project, "fb", 1)
    Workunit.objects.filter(pk=theirs.workunit_id).update(app_version=windows)
    request = work_request(
        project.host(), file_infos=[StickyFile("fa")], cpu_req_secs=3 * 3600.0, cpu_req_instances=0.0
    )
    reply = handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(locality_config=LocalityConfig(wait_period=0, sorted_order=True, delete_files=True)),
    )
    assert (reply.results, reply.delete_file_infos) == ([], [])


def test_a_locality_app_with_only_committed_work_for_the_host_is_left_to_locality(app, project):
    # sched_send.cpp send_work: under locality scheduling only send_work_locality runs, so
    # an app the host has no version of (its only version here is deprecated) is never sent
    # by the ordinary scan. The scan of rule 9 meets fa's first job, uncommitted, for which
    # get_app_version finds no version: ERR_NO_APP_VERSION ends the search before fa's
    # second job, committed to the old version, is looked at
    from backend.models import AppVersion

    app.homogeneous_app_version = True
    app.save()
    AppVersion.objects.filter(pk=project.version.pk).update(deprecated=True)
    [_, committed] = make_results(project, "fa", 2)
    Workunit.objects.filter(pk=committed.workunit_id).update(app_version=project.version)
    reply = hr_ask(project.host(), [], XEON, jobs=2)
    assert reply.results == []
    assert Result.objects.get(pk=committed.pk).server_state == ServerState.UNSENT


@pytest.mark.parametrize(
    "jobs_today, sent, deleted",
    [
        (0, ["fb"], ["fa"]),  # room for one job: fb's first is sent
        # at the quota: fa, with nothing for this volunteer, is still named for deletion; fb's
        # first job finds no version within the quota and ends the search (get_app_version)
        (1, [], ["fa"]),
    ],
)
def test_a_host_at_its_daily_quota_still_has_its_held_files_looked_at(app, project, jobs_today, sent, deleted):

    host = project.host(p_ncpus=1)
    HostAppVersionFactory(
        host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=jobs_today, jobs_day=NOW // 86400
    )
    make_results(project, "fb", 2)
    LocalityTrigger.objects.update(no_work_available=True)
    config = SchedulerConfig(daily_result_quota=1, file_deletion_strategy=1, locality_scheduling_sorted_order=True)
    reply = config_xml_request(host, ["fa", "fb"], config, cpu_req_secs=6 * 3600.0)
    assert (sent_files(reply), reply.delete_file_infos) == (sent, deleted)


@pytest.mark.parametrize("boinc_limits, sent", [(False, ["fa"]), (True, ["fa", "fa", "fa"])])
def test_the_daily_quota_holds_for_each_locality_job_unless_boincs_limits_are_asked_for(
    app, project, boinc_limits, sent
):
    # room for one job today: boincweb stops at it (its next job finds no version within the
    # quota, which ends the search). BOINC's get_app_version checks the quota when it first
    # chooses the version and returns its memoized choice to every later job of the request
    # (sched_locality.cpp possibly_send_result): the option boinc_locality_limits
    host = project.host(p_ncpus=1)
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=1, jobs_day=NOW // 86400)
    make_results(project, "fa", 3)
    config = SchedulerConfig(
        daily_result_quota=1, locality_scheduling_sorted_order=True, boinc_locality_limits=boinc_limits
    )
    reply = config_xml_request(host, ["fa"], config, cpu_req_secs=3 * 3600.0 - 1, cpu_req_instances=0.0)
    assert sent_files(reply) == sent


@pytest.mark.parametrize("boinc_limits", [False, True])
@pytest.mark.parametrize("limit", ["daily quota", "app's jobs in progress"])
def test_a_committed_locality_job_is_held_to_the_limits_unless_boincs_are_asked_for(app, project, limit, boinc_limits):
    # sched_version.cpp check_homogeneous_app_version, which get_app_version calls for a
    # workunit committed to a version, looks at neither the daily quota nor the app's limit
    # of jobs in progress: with boinc_locality_limits the committed job goes past both,
    # where boincweb's finds no version and ends the search
    from backend.daemons.sched_limit import read_job_limits

    app.homogeneous_app_version = True
    app.save()
    host = project.host(p_ncpus=1)
    first, second = make_results(project, "fa", 2)
    job_limits = None
    if limit == "daily quota":  # none left today: the first job, committed, finds no version
        committed = first
        HostAppVersionFactory(
            host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // 86400
        )
        expected = [first.name] if boinc_limits else []
    else:  # one job of the app at a time: the first job takes it, the second is committed
        committed = second
        job_limits = read_job_limits(
            "<config><max_jobs_in_progress><app><app_name>uppercase</app_name>"
            "<cpu_limit><jobs>1</jobs></cpu_limit></app></max_jobs_in_progress></config>"
        )
        expected = [first.name, second.name] if boinc_limits else [first.name]
    Workunit.objects.filter(pk=committed.workunit_id).update(app_version=project.version)
    config = SchedulerConfig(
        daily_result_quota=1,
        locality_scheduling_sorted_order=True,
        boinc_locality_limits=boinc_limits,
        job_limits=job_limits,
    )
    reply = config_xml_request(host, ["fa"], config, cpu_req_secs=2 * 3600.0 - 1, cpu_req_instances=0.0)
    assert [job.name for job in reply.results] == expected


@pytest.mark.parametrize("refusal", ["deadline", "memory", None])
def test_a_job_refused_for_its_deadline_or_memory_ends_the_locality_search(app, project, refusal):
    # sched_send.cpp work_needed(true): speed or memory insufficient stops the search, so
    # fb's job, which fits, is not looked at once fa's is refused
    [first] = make_results(project, "fa", 1)
    make_results(project, "fb", 1)
    if refusal == "deadline":  # 1 h of queue + a 1 h job > a 1 h bound
        Workunit.objects.filter(pk=first.workunit_id).update(delay_bound=3600)
    if refusal == "memory":
        Workunit.objects.filter(pk=first.workunit_id).update(rsc_memory_bound=8e9)
    request = work_request(
        project.host(),
        file_infos=[StickyFile("fa"), StickyFile("fb")],
        cpu_req_secs=2 * 3600.0,
        cpu_req_instances=0.0,
        estimated_delay=3600.0,
    )
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=4e9)
    reply = handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(locality_config=LocalityConfig(sorted_order=True, wait_period=0)),
    )
    assert sent_files(reply) == (["fa", "fb"] if refusal is None else [])


def test_a_locality_job_refused_for_its_deadline_says_tasks_wont_finish_in_time(app, project):
    # locality scheduling's possibly_send_result checks each job with sched_check.cpp
    # wu_is_infeasible_fast, whose check_deadline sets speed.insufficient: with nothing sent,
    # sched_send.cpp send_user_messages says the tasks won't finish in time (the
    # differential's seed 9101 locality cases 25, 62, 74 and others)
    [only] = make_results(project, "fa", 1)
    Workunit.objects.filter(pk=only.workunit_id).update(delay_bound=3600)  # 1 h queue + 1 h job
    request = work_request(
        project.host(),
        file_infos=[StickyFile("fa")],
        cpu_req_secs=2 * 3600.0,
        cpu_req_instances=0.0,
        estimated_delay=3600.0,
        work_req_seconds=2 * 3600.0,
    )
    reply = handle_request(
        request,
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(locality_config=LocalityConfig(sorted_order=True, wait_period=0)),
    )
    assert sent_files(reply) == []
    assert any(m.text.startswith("Tasks won't finish in time") for m in reply.messages)


@pytest.mark.parametrize("full_bound, deadline", [(False, NOW + 43200), (True, NOW + 86400)])
def test_boincs_locality_deadlines_give_a_reliable_job_its_full_delay_bound(app, project, full_bound, deadline):
    # sched_locality.cpp possibly_send_result passes wu_is_infeasible_fast the result's
    # report deadline (0) for its priority, so get_delay_bound_range never shortens the
    # bound of a job needing a reliable host (docs/server-fidelity.md, BOINC defect 2); the
    # option boinc_locality_full_delay_bound does as BOINC does
    [only] = make_results(project, "fa", 1)
    Result.objects.filter(pk=only.pk).update(priority=1)
    Workunit.objects.filter(pk=only.workunit_id).update(delay_bound=86400)
    host = project.host()
    HostAppVersionFactory(host=host, app_version=project.version, consecutive_valid=10, max_jobs_per_day=100)
    request = work_request(host, file_infos=[StickyFile("fa")], cpu_req_secs=600.0, cpu_req_instances=0.0)
    config = SchedulerConfig(
        reliable_on_priority=1,
        reliable_reduced_delay_bound=0.5,
        boinc_locality_full_delay_bound=full_bound,
        locality_config=LocalityConfig(sorted_order=True, wait_period=0),
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert [job.report_deadline for job in reply.results] == [deadline]


@pytest.mark.parametrize("lost_needs", [8e9, 1e9])
def test_a_lost_result_the_host_lacks_memory_for_ends_the_locality_search(app, project, lost_needs):
    # sched_resend.cpp checks a lost result with wu_is_infeasible_fast, whose check_memory
    # sets mem.insufficient for the whole request; locality scheduling's work_needed(true)
    # then stops before any file is looked at (the differential's seed 9202 locality case 153)
    host = project.host()
    [lost] = make_results(project, "fb", 1)
    Result.objects.filter(pk=lost.pk).update(
        server_state=ServerState.IN_PROGRESS,
        host=host,
        user=host.owner,
        sent_time=NOW - 100,
        report_deadline=NOW + 86400,
    )
    Workunit.objects.filter(pk=lost.workunit_id).update(rsc_memory_bound=lost_needs)
    make_results(project, "fa", 1)
    request = work_request(
        host, file_infos=[StickyFile("fa")], other_results=[], cpu_req_secs=600.0, cpu_req_instances=0.0
    )
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=4e9)
    config = SchedulerConfig(resend_lost_results=True, locality_config=LocalityConfig(sorted_order=True, wait_period=0))
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    if lost_needs > 4e9:
        assert sent_files(reply) == []
        assert any(m.text.startswith("Didn't resend lost task") for m in reply.messages)
    else:  # resent, and then nothing more is sent (BOINC's resend ends the request's sending)
        assert sent_files(reply) == ["fb"]


@pytest.mark.parametrize("gpu_asks", [False, True])
@pytest.mark.parametrize("looked_at", [False, True])
def test_a_version_over_its_daily_quota_is_named_only_when_a_locality_job_asks_for_one(
    app, project, looked_at, gpu_asks
):
    # (a GPU asking for work, which no version runs, gives the app no choice of its own:
    # the differential's seed 9303 locality case 210)
    from backend.daemons.scheduler import GpuRequest

    # locality scheduling asks get_app_version (whose daily_quota_exceeded adds "Daily job
    # limit (n) has been reached") only for the jobs it looks at; send_results_for_file
    # looks only at results above the volunteer's largest result id of the file (the
    # differential's seed 9202 locality cases 201, 225, 262, 263)
    host = project.host(p_ncpus=1)
    HostAppVersionFactory(
        host=host, app_version=project.version, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // 86400
    )
    [unsent] = make_results(project, "fa", 1)
    [mine] = make_results(project, "fa", 1, start=1)
    Result.objects.filter(pk=mine.pk).update(
        server_state=ServerState.OVER, host=host, user=host.owner, sent_time=NOW - 100
    )
    if looked_at:
        make_results(project, "fa", 1, start=2)
    request = work_request(
        host,
        file_infos=[StickyFile("fa")],
        cpu_req_secs=600.0,
        cpu_req_instances=0.0,
        work_req_seconds=600.0,
        gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=600.0)] if gpu_asks else [],
    )
    config = SchedulerConfig(locality_config=LocalityConfig(sorted_order=True, wait_period=0))
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    texts = [m.text for m in reply.messages]
    assert ("Daily job limit (1) has been reached" in texts) is looked_at
    assert ("This computer has finished a daily quota of 1 tasks" in texts) is looked_at


@pytest.mark.parametrize("memory, sent", [(8e9, []), (1e9, ["fa"])])
def test_an_old_result_the_volunteer_has_one_of_is_checked_before_the_rule_drops_it(app, project, memory, sent):
    # sched_locality.cpp possibly_send_result applies one_result_per_user_per_wu after
    # wu_is_infeasible_fast: an old result whose workunit the volunteer already has is still
    # checked for memory, and one too big for the host ends the search (mem.insufficient);
    # one that fits is dropped, and the host's own file goes on (the differential's seed
    # 9101 locality case 195)
    locality.create_data_files(app, ["fc"], nbytes=10**6)
    host = project.host()
    [old] = make_results(project, "fc", 1)
    project.result(
        old.workunit, server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner
    )
    Workunit.objects.filter(pk=old.workunit_id).update(rsc_memory_bound=memory)
    make_results(project, "fa", 1)
    aged([old], NOW - WEEK - 3600)
    request = work_request(host, file_infos=[StickyFile("fa")], cpu_req_secs=3600.0 - 1, cpu_req_instances=0.0)
    request.host_info = dataclasses.replace(request.host_info, n_bwdown=FAST, m_nbytes=4e9)
    config = SchedulerConfig(locality_scheduling_send_timeout=WEEK, one_result_per_user_per_wu=True)
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert sent_files(reply) == sent


def test_a_held_file_named_by_rule_7_and_for_disk_is_named_twice(app, project):
    # sched_locality.cpp: file_deletion_strategy 1 names fa, which sent nothing while work
    # was wanted; the scan then finds fb's job too big for the disk, and send_file_deletes'
    # delete_file_from_host names fa (the only file listed) again (the differential's seed
    # 9101 locality cases 16 and 60)
    make_results(project, "fb", 1)
    host = project.host()
    request = disk_request(host, ["fa"], max_used_gb=1, used=0.5 * GIGA)
    config = SchedulerConfig(file_deletion_strategy=1, locality_config=LocalityConfig(sorted_order=True, wait_period=0))
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    assert reply.delete_file_infos == ["fa", "fa"]
    assert [m.text for m in reply.messages if "BOINC will" in m.text] == [
        "BOINC will delete file fa when no longer needed"
    ]


@pytest.mark.parametrize("memory, ram, told", [(8e9, 4e9, False), (2e9, 1e9, True)])
def test_a_locality_job_names_only_the_versions_its_own_choice_looks_at(app, project, memory, ram, told):
    # get_app_version scans a job's platforms; a job needing more than a 32-bit address
    # space skips the 32-bit platform, so that platform's version over its daily quota is
    # not named for it (the differential's seed 9101 locality case 141). Both jobs are too
    # big for the host, so nothing is sent and the notices are given
    i686 = AppVersionFactory(app=project.app, version_num=100, platform="i686-pc-linux-gnu")
    host = project.host()
    HostAppVersionFactory(host=host, app_version=i686, max_jobs_per_day=1, n_jobs_today=1, jobs_day=NOW // 86400)
    [only] = make_results(project, "fa", 1)
    Workunit.objects.filter(pk=only.workunit_id).update(rsc_memory_bound=memory)
    request = work_request(
        host,
        file_infos=[StickyFile("fa")],
        cpu_req_secs=600.0,
        cpu_req_instances=0.0,
        work_req_seconds=600.0,
        alt_platforms=["i686-pc-linux-gnu"],
    )
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=ram)
    config = SchedulerConfig(locality_config=LocalityConfig(sorted_order=True, wait_period=0))
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    texts = [m.text for m in reply.messages]
    assert any("MB RAM but only" in text for text in texts)
    assert ("Daily job limit (1) has been reached" in texts) is told


@pytest.mark.parametrize("runnable, deleted", [(False, ["fa"]), (True, ["fa"])])
def test_a_locality_app_with_no_version_for_the_host_still_looks_at_its_held_files(app, project, runnable, deleted):
    # sched_locality.cpp send_work_locality runs whatever versions the host has: fa, held,
    # gives nothing and is named for deletion (file_deletion_strategy 1); fb's job then
    # finds no version (ERR_NO_APP_VERSION) and ends the search (the differential's seed
    # 9202 locality case 231). A host with a version gets fb's job
    from backend.models import AppVersion

    make_results(project, "fb", 1)
    if not runnable:
        AppVersion.objects.filter(pk=project.version.pk).update(min_core_version=90000)
    request = work_request(
        project.host(),
        file_infos=[StickyFile("fa")],
        cpu_req_secs=600.0,
        cpu_req_instances=0.0,
        work_req_seconds=600.0,
    )
    config = SchedulerConfig(file_deletion_strategy=1, locality_config=LocalityConfig(sorted_order=True, wait_period=0))
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert sent_files(reply) == (["fb"] if runnable else [])
    assert reply.delete_file_infos == deleted
    if not runnable:
        assert [m.text for m in reply.messages] == ["No tasks sent"]


CUDA_SPEC = """<plan_classes><plan_class><name>cuda</name><gpu_type>nvidia</gpu_type>
<min_driver_version>40000</min_driver_version></plan_class></plan_classes>"""


@pytest.mark.parametrize("cpu_asked", [True, False])
@pytest.mark.parametrize("gpu_version_runs", [True, False])
@pytest.mark.parametrize("looked_at", [False, True])
def test_a_locality_jobs_gpu_plan_classes_tell_of_an_old_driver_only_when_looked_at(
    app, project, tmp_path, looked_at, gpu_version_runs, cpu_asked
):
    # locality scheduling checks plan classes (and notes their GPU requirements) only in
    # get_app_version for the jobs it looks at (the differential's seed 9202 locality cases
    # 119 and 148); send_results_for_file looks only above the volunteer's last result. With
    # no CPU work asked for, the app has no version on any resource, and the job's
    # get_app_version still checks every version's plan class (seed 9707's locality cases
    # 138 and 271)
    from backend.daemons.scheduler import GpuRequest
    from backend.models import GpuType

    spec = tmp_path / "plan_class_spec.xml"
    spec.write_text(CUDA_SPEC)
    AppVersionFactory(
        app=project.app,
        version_num=100,
        plan_class="cuda",
        gpu_type=GpuType.NVIDIA,
        gpu_usage=1,
        # a client too old for it: its plan class is checked all the same (seed 9202 case 119)
        min_core_version=0 if gpu_version_runs else 90000,
    )
    host = project.host()
    make_results(project, "fa", 1)  # below the volunteer's last result: never looked at
    [mine] = make_results(project, "fa", 1, start=1)
    Result.objects.filter(pk=mine.pk).update(server_state=ServerState.OVER, host=host, user=host.owner)
    if looked_at:
        [later] = make_results(project, "fa", 1, start=2)
        Workunit.objects.filter(pk=later.workunit_id).update(rsc_memory_bound=8e9)  # too big: nothing sent
    request = work_request(
        host,
        file_infos=[StickyFile("fa")],
        cpu_req_secs=600.0 if cpu_asked else 0.0,
        cpu_req_instances=0.0,
        work_req_seconds=600.0 if cpu_asked else 0.0,
        gpu_requests=[
            GpuRequest("NVIDIA", count=1, peak_flops=1e12, gpu_ram=2**32, driver_version=35000, req_secs=600)
        ],
    )
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=4e9)
    config = SchedulerConfig(
        plan_class_spec=str(spec), locality_config=LocalityConfig(sorted_order=True, wait_period=0)
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    told = ("NVIDIA GPU: Upgrade to the latest driver to process tasks using your computer's GPU", "notice")
    assert (told in [(m.text, m.priority) for m in reply.messages]) is looked_at


@pytest.mark.parametrize("workunit, told", [("same", False), ("other", True)])
def test_the_next_result_of_the_volunteers_last_workunit_is_never_looked_at(app, project, workunit, told):
    # send_results_for_file asks for the next unsent result of another workunit than the
    # last one looked at (the volunteer's last, at first); a result of another workunit the
    # volunteer has is looked at, checked (its deadline here) and only then passed over by
    # possibly_send_result (the differential's seed 9202 locality case 185)
    from backend.models import File

    host = project.host()

    def workunit_of(k):
        wu = project.workunit(name=f"fa__{k}", delay_bound=3600)  # 1 h queue + 1 h job > 1 h
        wu.input_files.add(File.objects.get(name="fa"))
        return wu

    other, same = workunit_of(1), workunit_of(2)
    for wu in (other, same):
        project.result(wu, server_state=ServerState.OVER, host=host, user=host.owner)
    project.result(same if workunit == "same" else other)
    request = work_request(
        host,
        file_infos=[StickyFile("fa")],
        cpu_req_secs=7200.0,
        cpu_req_instances=0.0,
        work_req_seconds=7200.0,
        estimated_delay=3600.0,
    )
    config = SchedulerConfig(
        one_result_per_user_per_wu=True, locality_config=LocalityConfig(sorted_order=True, wait_period=0)
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    assert any(m.text.startswith("Tasks won't finish in time") for m in reply.messages) is told
