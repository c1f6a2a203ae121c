"""Locality scheduling, one test per rule of seed 004 / reference/server.md §3.10 (the rules
are numbered as in backend/daemons/sched_locality.py's docstring)."""

from dataclasses import replace

import pytest

from backend.daemons import run_pass
from backend.daemons import sched_locality as locality
from backend.daemons.sched_locality import LocalityConfig, file_name_of
from backend.daemons.scheduler import SchedulerConfig, StickyFile, handle_request
from backend.daemons.work_generator import create_work_for_file
from backend.models import File, Host, LocalityTrigger, Outcome, Result, ServerState, Workunit
from tests.backend.conftest import work_request
from tests.factories import NOW, FileFactory, demo_project

pytestmark = pytest.mark.django_db

ONE_JOB = dict(cpu_req_secs=1.0, cpu_req_instances=0.0)


@pytest.fixture
def app(project):
    project.app.locality_scheduling = True
    project.app.save()
    locality.create_data_files(project.app, ["fa", "fb", "fc"], nbytes=10**6)
    return project.app


def make_results(project, file_name, count, start=0):
    """``count`` workunits of ``file_name`` with one unsent result each; returns the results."""
    results = []
    for k in range(start, start + count):
        wu = project.workunit(name=f"{file_name}__{k}")
        wu.input_files.add(File.objects.get(name=file_name))
        results.append(project.result(wu))
    return results


# the simulated world follows seed 004's rules 7 and 9 (world.simulation passes these)
SEED = dict(scan_only_excluded=True, delete_only_finished=True)


SEED_CONFIG = LocalityConfig(**SEED)


def ask(host, files=(), now=NOW, config=SEED_CONFIG, wait=None, **fields):
    request = work_request(host, file_infos=[StickyFile(name) for name in files], **fields)
    if wait is not None:
        config = replace(config, wait=wait)
    return handle_request(request, project=demo_project(), now=now, config=SchedulerConfig(locality_config=config))


def sent_files(reply):
    return [file_name_of(job.wu_name) for job in reply.results]


@pytest.mark.parametrize(
    "wu_name, file_name",
    [
        ("h1_0001.50__S5R3__12_1", "h1_0001.50"),
        ("a__b__c", "a"),
        ("plain_name", None),
        ("__no_file", None),
    ],
)
def test_rule_1_a_workunit_name_starts_with_its_big_file(wu_name, file_name):
    assert file_name_of(wu_name) == file_name


def test_big_files_are_sent_sticky_and_report_on_rpc(app, project):
    """Seed 004: each large input file's <file_info> carries <sticky/> and <report_on_rpc/>."""
    make_results(project, "fa", 1)
    (job,) = ask(project.host(), files=["fa"], **ONE_JOB).results
    (big,) = job.workunit.input_files
    assert (big.name, big.sticky, big.report_on_rpc) == ("fa", True, True)


def test_rule_2_the_files_a_host_reports_are_recorded(app, project):
    host = project.host()
    ask(host, files=["fa", "fb"], dont_send_work=True)
    assert sorted(host.files.values_list("name", flat=True)) == ["fa", "fb"]


@pytest.mark.parametrize(
    "held, expected",
    [
        (["fb"], {"fb"}),
        (["fa"], {"fa"}),
        (["fc", "fb"], {"fb", "fc"}),
    ],
)
def test_rule_3_a_host_gets_results_of_files_it_already_holds(app, project, held, expected):
    for name in ("fa", "fb", "fc"):
        make_results(project, name, 3)
    # exactly as much work as the held files have: three one-hour jobs per file
    reply = ask(project.host(), files=held, cpu_req_secs=3 * 3600.0 * len(held))
    assert set(sent_files(reply)) == expected
    assert len(reply.results) == 3 * len(held)
    assert not any(f.name not in held for job in reply.results for f in job.workunit.input_files)


def test_rule_3_sorted_order_tries_files_by_name_and_random_order_varies(app, project):
    make_results(project, "fa", 5)
    make_results(project, "fb", 5)
    host = project.host()
    sorted_config = LocalityConfig(**SEED, sorted_order=True)
    firsts = {
        sent_files(ask(host, files=["fb", "fa"], now=NOW + k, config=sorted_config, dont_send_work=False, **ONE_JOB))[0]
        for k in range(2)
    }
    assert firsts == {"fa"}
    Result.objects.filter(host=host).update(server_state=ServerState.UNSENT, host=None, user=None)
    firsts = set()
    for k in range(12):
        reply = ask(host, files=["fa", "fb"], now=NOW + 100 + k, **ONE_JOB)
        firsts.add(sent_files(reply)[0])
        Result.objects.filter(host=host).update(server_state=ServerState.UNSENT, host=None, user=None)
    assert firsts == {"fa", "fb"}


def test_rule_4_results_go_to_a_volunteer_in_increasing_id_per_file(app, project):
    low, middle, high = make_results(project, "fa", 3)
    host = project.host()
    # The volunteer already had the middle result of fa (on another host of theirs).
    other = project.host(owner=host.owner)
    Result.objects.filter(pk=middle.pk).update(server_state=ServerState.IN_PROGRESS, host=other, user=host.owner)
    reply = ask(host, files=["fa"])
    assert [job.name for job in reply.results] == [high.name]
    assert Result.objects.get(pk=low.pk).server_state == ServerState.UNSENT


def test_rule_5_one_result_per_user_per_workunit(app, project):
    [first] = make_results(project, "fa", 1)
    twin = project.result(first.workunit)
    [second] = make_results(project, "fa", 1, start=1)
    host = project.host()
    reply = ask(host, files=["fa"])
    sent = {job.name for job in reply.results}
    assert sent == {first.name, second.name}
    assert twin.name not in sent
    # another volunteer gets the twin
    reply = ask(project.host(), files=["fa"], now=NOW + 1)
    assert [job.name for job in reply.results] == [twin.name]


@pytest.mark.parametrize(
    "no_work_available, wait_period, sent, need_work, waited",
    [
        # the trigger is set, the scheduler waits, the generator makes work, it is sent
        (False, 10, 2, False, 1),
        # no wait configured: the trigger is set and left for the generator's next pass
        (False, 0, 0, True, 0),
        # the generator said no more work for this file: no trigger, no wait
        (True, 10, 0, False, 0),
    ],
)
def test_rule_6_need_work_trigger_waits_for_the_on_demand_generator(
    app, project, no_work_available, wait_period, sent, need_work, waited
):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=no_work_available)
    waits = []

    def wait(file_name, *, now, seconds):
        waits.append((file_name, seconds))
        locality.generate_on_demand(app, now=now, per_file=2)
        run_pass("transitioner", project=demo_project(), now=now + seconds)

    reply = ask(project.host(), files=["fa"], config=LocalityConfig(**SEED, wait_period=wait_period), wait=wait)
    assert len(waits) == waited
    assert sent_files(reply) == ["fa"] * sent
    trigger = LocalityTrigger.objects.get(file_name="fa")
    assert trigger.need_work is need_work
    if waited:
        assert waits == [("fa", wait_period)]
        assert trigger.no_work_available


@pytest.mark.parametrize(
    "no_work_available, unsent, deleted",
    [
        (True, False, True),  # nothing left and nothing coming: delete
        (False, False, False),  # the generator may still make work: keep
        (True, True, False),  # work left but excluded for this volunteer: keep
    ],
)
def test_rule_7_a_file_without_work_is_marked_and_deleted_from_the_host(
    app, project, no_work_available, unsent, deleted
):
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=no_work_available)
    host = project.host()
    if unsent:
        [mine] = make_results(project, "fa", 1)
        twin = project.result(mine.workunit)
        Result.objects.filter(pk=mine.pk).update(server_state=ServerState.IN_PROGRESS, host=host, user=host.owner)
    reply = ask(host, files=["fa"], config=LocalityConfig(**SEED, wait_period=0, delete_files=True))
    assert ("fa" in reply.delete_file_infos) is deleted
    assert LocalityTrigger.objects.get(file_name="fa").no_work is (not unsent)
    if unsent:
        assert Result.objects.get(pk=twin.pk).server_state == ServerState.UNSENT


def test_rule_8_a_host_without_files_gets_a_working_set_file(app, project):
    for name in ("fa", "fb", "fc"):
        make_results(project, name, 4)
    LocalityTrigger.objects.filter(file_name__in=["fb", "fc"]).update(in_working_set=True)
    host = project.host()
    reply = ask(host, **ONE_JOB)
    assert sent_files(reply)[0] in {"fb", "fc"}
    # sorted order walks the working set by the host's RPC count
    picks = []
    for seqno in range(2):
        Result.objects.filter(host=host).update(server_state=ServerState.UNSENT, host=None, user=None)
        reply = ask(
            host, config=LocalityConfig(**SEED, sorted_order=True), now=NOW + 1 + seqno, rpc_seqno=seqno, **ONE_JOB
        )
        picks.append(sent_files(reply)[0])
    names = ["fb", "fc"]
    assert picks == [names[(host.pk + s) % 2] for s in range(2)]


def test_rule_9_an_excluded_working_set_file_falls_back_to_a_scan_by_name(app, project):
    [taken] = make_results(project, "fa", 1)
    make_results(project, "fc", 2)
    make_results(project, "fb", 2)
    LocalityTrigger.objects.filter(file_name="fa").update(in_working_set=True, no_work_available=True)
    host = project.host()
    other = project.host(owner=host.owner)
    project.result(taken.workunit)  # fa's only sendable result is for a workunit we hold
    Result.objects.filter(pk=taken.pk).update(server_state=ServerState.IN_PROGRESS, host=other, user=host.owner)
    reply = ask(host, **ONE_JOB)
    assert sent_files(reply) == ["fb"]


def test_working_set_manager_keeps_n_over_m_files_and_drops_files_without_work(app, project):
    app.target_nresults = 2
    app.save()
    for k in range(4):
        project.host(rpc_time=NOW - 10)
    project.host(rpc_time=NOW - 2 * 86400)  # not active
    assert locality.working_set_size(app, now=NOW) == 2
    assert locality.manage_working_set(app, now=NOW) == 2
    assert list(LocalityTrigger.objects.filter(in_working_set=True).values_list("file_name", flat=True)) == ["fa", "fb"]
    LocalityTrigger.objects.filter(file_name="fa").update(no_work=True)
    LocalityTrigger.objects.filter(file_name="fb").update(no_work_available=True)
    assert locality.manage_working_set(app, now=NOW) == 2
    assert list(LocalityTrigger.objects.filter(in_working_set=True).values_list("file_name", flat=True)) == ["fb", "fc"]


def test_on_demand_generator_makes_a_files_share_of_workunits_once(app, project):
    LocalityTrigger.objects.filter(file_name__in=["fa", "fb"]).update(need_work=True)
    assert locality.generate_on_demand(app, now=NOW, per_file=3) == 6
    assert sorted({file_name_of(n) for n in app.workunits.values_list("name", flat=True)}) == ["fa", "fb"]
    assert all(wu.input_files.get().name == file_name_of(wu.name) for wu in app.workunits.all())
    assert not LocalityTrigger.objects.filter(need_work=True).exists()
    assert LocalityTrigger.objects.filter(no_work_available=True).count() == 2
    LocalityTrigger.objects.filter(file_name="fa").update(need_work=True)
    assert locality.generate_on_demand(app, now=NOW + 1, per_file=3) == 0


def test_the_working_set_counts_only_hosts_that_can_run_the_app(app, project):
    app.target_nresults = 1
    app.save()
    project.host(rpc_time=NOW - 10)
    project.host(rpc_time=NOW - 10, platform="another-world-x86_64-pc-linux-gnu")
    assert locality.working_set_size(app, now=NOW) == 1


def test_on_demand_generator_adds_work_per_trigger_up_to_the_files_share(app, project):
    made = []
    for k in range(3):
        LocalityTrigger.objects.filter(file_name="fa").update(need_work=True)
        made.append(locality.generate_on_demand(app, now=NOW + k, per_file=5, per_trigger=2))
        made.append(LocalityTrigger.objects.get(file_name="fa").no_work_available)
    assert made == [2, False, 2, False, 1, True]
    assert app.workunits.count() == 5


def test_a_plain_app_is_not_sent_by_locality(project):
    locality.create_data_files(project.app, ["fa"], nbytes=1)
    make_results(project, "fa", 1)
    host = project.host()
    reply = ask(host, files=[])
    assert sent_files(reply) == ["fa"]
    assert not Host.objects.get(pk=host.pk).files.exists()


@pytest.mark.parametrize("names", [["fd", "bad__name"], ["__"], [""]])
def test_rule_1_a_data_file_name_with_a_double_underscore_is_refused(app, names):
    with pytest.raises(ValueError, match="cannot contain '__'") as info:
        locality.create_data_files(app, names, nbytes=1)
    assert repr(names[-1]) in str(info.value)
    assert not File.objects.filter(name__in=names).exists()
    assert not LocalityTrigger.objects.filter(file_name__in=names).exists()


def test_rule_1_the_generator_refuses_work_for_a_file_named_with_a_double_underscore(app, project):
    bad = FileFactory(name="h1__0001", sticky=True)
    with pytest.raises(ValueError, match="'h1__0001' contains '__'"):
        create_work_for_file(app, bad, now=NOW, count=2)
    assert not app.workunits.exists()


def test_rule_6_no_work_available_still_sends_a_retry_of_an_old_workunit(app, project):
    """Seed 004: with no_work_available the scheduler skips notify-sleep-query, "of course it
    still does the initial query", so a new replica of an old workunit is picked up."""
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True, no_work=True)
    [old] = make_results(project, "fa", 1)
    gone = project.host()
    Result.objects.filter(pk=old.pk).update(
        server_state=ServerState.IN_PROGRESS, host=gone, user=gone.owner, sent_time=NOW - 200, report_deadline=NOW - 100
    )
    Workunit.objects.filter(pk=old.workunit_id).update(transition_time=NOW - 100)
    run_pass("transitioner", project=demo_project(), now=NOW)
    [retry] = Result.objects.filter(workunit_id=old.workunit_id, server_state=ServerState.UNSENT)
    assert Result.objects.get(pk=old.pk).outcome == Outcome.NO_REPLY
    waits = []
    reply = ask(
        project.host(),
        files=["fa"],
        now=NOW + 1,
        config=LocalityConfig(**SEED, wait_period=10),
        wait=lambda *a, **k: waits.append(a),
    )
    assert [job.name for job in reply.results] == [retry.name]
    assert waits == []
    assert not LocalityTrigger.objects.get(file_name="fa").need_work


def fill_working_set(names):
    LocalityTrigger.objects.filter(file_name__in=names).update(in_working_set=True)


@pytest.mark.parametrize("situation", ["empty working set", "chosen file fills part", "chosen file has no work"])
def test_rule_9_no_fallback_scan_unless_the_chosen_file_is_excluded(app, project, situation):
    """Seed 004: fall back to a deterministic choice only "if F is excluded for this user",
    "not in general, to avoid flocking"."""
    make_results(project, "fc", 3)  # work the fallback scan would find
    LocalityTrigger.objects.update(no_work_available=True)
    if situation == "chosen file fills part":
        make_results(project, "fa", 1)
        fill_working_set(["fa"])
    elif situation == "chosen file has no work":
        fill_working_set(["fb"])
    reply = ask(project.host(), cpu_req_secs=3 * 3600.0)
    expected = ["fa"] if situation == "chosen file fills part" else []
    assert sent_files(reply) == expected
    assert Result.objects.filter(workunit__name__startswith="fc__", server_state=ServerState.UNSENT).count() == 3
    if situation == "chosen file has no work":
        assert LocalityTrigger.objects.get(file_name="fb").no_work


def test_rule_9_the_fallback_fills_the_request_in_file_name_order(app, project):
    [taken] = make_results(project, "fa", 1)
    make_results(project, "fc", 2)
    make_results(project, "fb", 1)
    fill_working_set(["fa"])
    LocalityTrigger.objects.update(no_work_available=True)
    host = project.host()
    project.result(taken.workunit)  # fa's only unsent result is a twin of one the user has
    Result.objects.filter(pk=taken.pk).update(
        server_state=ServerState.IN_PROGRESS, host=project.host(owner=host.owner), user=host.owner
    )
    reply = ask(host, cpu_req_secs=3 * 3600.0)
    assert sent_files(reply) == ["fb", "fc", "fc"]


def test_a_file_without_work_rejoins_the_working_set_when_a_retry_appears(app, project):
    """Seed 004: "BOINC may later create more results for the file, so it may be necessary
    to add it to the working set again"."""
    app.target_nresults = 1
    app.save()
    host = project.host(rpc_time=NOW - 10)  # the only active host: N/M = 1 file in the set
    [old] = make_results(project, "fa", 1)
    LocalityTrigger.objects.filter(file_name="fa").update(no_work_available=True)
    fill_working_set(["fa"])
    Result.objects.filter(pk=old.pk).update(server_state=ServerState.IN_PROGRESS)
    reply = ask(host, now=NOW, **ONE_JOB)  # fa is chosen and has nothing
    assert reply.results == []
    assert LocalityTrigger.objects.get(file_name="fa").no_work
    locality.manage_working_set(app, now=NOW)
    assert list(LocalityTrigger.objects.filter(in_working_set=True).values_list("file_name", flat=True)) == ["fb"]
    # the transitioner makes a retry of fa's old workunit
    Result.objects.filter(pk=old.pk).update(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY)
    retry = project.result(old.workunit)
    LocalityTrigger.objects.filter(file_name="fb").update(no_work=True)  # fb is used up
    assert locality.manage_working_set(app, now=NOW + 1) == 3  # fa re-opened, fb out, fa in
    trigger = LocalityTrigger.objects.get(file_name="fa")
    assert (trigger.in_working_set, trigger.no_work) == (True, False)
    # a host holding no file is sent the retry through the working set
    reply = ask(host, now=NOW + 2, **ONE_JOB)
    assert [job.name for job in reply.results] == [retry.name]


def test_a_re_opened_file_comes_before_new_files_when_the_set_is_topped_up(app, project):
    app.target_nresults = 1
    app.save()
    project.host(rpc_time=NOW - 10)
    [old] = make_results(project, "fc", 1)
    LocalityTrigger.objects.filter(file_name="fc").update(no_work=True, no_work_available=True)
    assert locality.manage_working_set(app, now=NOW) == 2
    assert list(LocalityTrigger.objects.filter(in_working_set=True).values_list("file_name", flat=True)) == ["fc"]
    # without unsent results a no_work file stays out
    Result.objects.filter(pk=old.pk).update(server_state=ServerState.IN_PROGRESS)
    LocalityTrigger.objects.update(in_working_set=False)
    LocalityTrigger.objects.filter(file_name="fc").update(no_work=True)
    assert locality.manage_working_set(app, now=NOW + 1) == 1
    assert list(LocalityTrigger.objects.filter(in_working_set=True).values_list("file_name", flat=True)) == ["fa"]


def test_random_choices_follow_the_seed_and_host_key_not_the_database_id(app, project):
    for name in ("fa", "fb", "fc"):
        make_results(project, name, 6)
    fill_working_set(["fa", "fb", "fc"])

    def firsts(host, seed, key):
        picks = []
        for k in range(8):
            config = LocalityConfig(**SEED, seed=seed, host_key=key)
            reply = handle_request(
                work_request(host, rpc_seqno=k, **ONE_JOB),
                project=demo_project(),
                now=NOW + k,
                config=SchedulerConfig(locality_config=config),
            )
            picks.append(sent_files(reply)[0])
            Result.objects.filter(host=host).update(server_state=ServerState.UNSENT, host=None, user=None)
        return picks

    one, two = project.host(), project.host()
    assert firsts(one, seed=5, key=3) == firsts(two, seed=5, key=3)
    assert len({tuple(firsts(one, seed=s, key=3)) for s in range(4)}) > 1
