"""Whole lifecycles through every daemon, and each daemon's rules not covered elsewhere."""

import hashlib

import pytest

from backend.daemons import assimilator, file_deleter, run_pass, validator, work_generator
from backend.daemons.hierarchy import (
    assimilated_path,
    download_path,
    partial_upload_path,
    upload_path,
)
from backend.daemons.scheduler import ReportedFile, ReportedResult, handle_request
from backend.models import (
    INT_MAX,
    AssimilatedResult,
    AssimilateState,
    ClientState,
    DaemonStatus,
    ErrorMask,
    File,
    FileDeleteState,
    Host,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import NOW, FileFactory, demo_project

pytestmark = pytest.mark.django_db

ORDER = ["transitioner", "validator", "assimilator", "file_deleter", "transitioner", "file_deleter"]


def daemons(now):
    return sum(run_pass(name, project=demo_project(), now=now) for name in ORDER)


def compute(host, now, output=lambda job: job.wu_name.encode(), **report):
    """One RPC asking for work, then one reporting everything it got."""
    reply = handle_request(work_request(host), project=demo_project(), now=now)
    reports = [
        ReportedResult(
            job.name,
            final_elapsed_time=10,
            final_cpu_time=10,
            output_files=[ReportedFile(job.output_files[0].name, data=output(job))],
            **report,
        )
        for job in reply.results
    ]
    handle_request(work_request(host, cpu_req_secs=0, results=reports), project=demo_project(), now=now + 1)
    return reply.results


def test_a_quorum_of_two_goes_from_creation_to_deletion(project):
    app = project.app
    app.min_quorum = app.target_nresults = 2
    app.save()
    [wu] = work_generator.create_work(app, ["job"], now=NOW)
    assert download_path(demo_project(), "job.in").exists()
    daemons(NOW + 1)
    assert wu.results.count() == 2
    a, b = project.host(), project.host()
    compute(a, NOW + 2)
    compute(b, NOW + 3)
    for t in range(NOW + 5, NOW + 10):
        daemons(t)
    wu.refresh_from_db()
    assert wu.canonical_result_id and wu.assimilate_state == AssimilateState.DONE
    assert wu.file_delete_state == FileDeleteState.DONE
    assert (
        list(wu.results.values_list("validate_state", "file_delete_state"))
        == [(ValidateState.VALID, FileDeleteState.DONE)] * 2
    )
    # CreditNew: the run's elapsed time x its version's FLOPS, the same on both hosts
    credit = wu.canonical_credit
    assert credit > 0
    assert sorted(Host.objects.values_list("total_credit", flat=True)) == pytest.approx([credit, credit])
    record = AssimilatedResult.objects.get(workunit=wu)
    assert record.output_md5 == hashlib.md5(b"job").hexdigest()
    assert assimilated_path(demo_project(), app.name, "job").read_bytes() == b"job"
    assert not download_path(demo_project(), "job.in").exists()
    assert not any(upload_path(demo_project(), f.name).exists() for f in File.objects.filter(kind="output"))
    assert LifecycleEvent.objects.filter(workunit=wu).count() > 10


@pytest.mark.parametrize(
    "outputs, canonical, states, error_mask, target",
    [
        # two agree: the first of them is canonical
        ([b"1", b"1"], 0, ["VALID", "VALID"], 0, 2),
        # they disagree: both inconclusive, one more replica
        ([b"1", b"2"], None, ["INCONCLUSIVE", "INCONCLUSIVE"], 0, 3),
        # quorum 2 needs a majority of 2: 2 of 3 agree, the odd one is INVALID
        ([b"1", b"2", b"2"], 1, ["INVALID", "VALID", "VALID"], 0, 2),
        # too many successes without consensus: the error, and (validator.cpp checks both) one
        # more replica asked for
        ([b"1", b"2", b"3", b"4"], None, ["INCONCLUSIVE"] * 4, ErrorMask.TOO_MANY_SUCCESS_RESULTS, 5),
        # an unusable output is a VALIDATE_ERROR and the rest wait
        ([None, b"1"], None, ["INVALID", "INCONCLUSIVE"], 0, 2),
    ],
)
def test_rule_3_7_consensus_canonical_and_replicas(project, outputs, canonical, states, error_mask, target):
    wu = project.workunit(
        min_quorum=2,
        target_nresults=2,
        max_success_results=3,
        max_total_results=6,
        max_error_results=3,
        need_validate=True,
    )
    results = []
    for data in outputs:
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=project.host())
        if data is not None:
            FileFactory(result=r, md5_cksum=hashlib.md5(data).hexdigest())
        results.append(r)
    assert validator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    wu.refresh_from_db()
    got = [
        ValidateState(s).name
        for s in Result.objects.filter(workunit=wu).order_by("id").values_list("validate_state", flat=True)
    ]
    assert got == states
    assert wu.canonical_result_id == (results[canonical].pk if canonical is not None else None)
    assert (wu.error_mask, wu.target_nresults, wu.need_validate) == (error_mask, target, False)
    if canonical is not None:
        assert wu.assimilate_state == AssimilateState.READY
    if outputs[0] is None:
        assert Result.objects.get(pk=results[0].pk).outcome == Outcome.VALIDATE_ERROR


def test_rule_3_7_credit_is_granted_once_and_late_results_checked_against_canonical(project):
    wu = project.workunit(need_validate=True)
    host = project.host()
    first = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host)
    FileFactory(result=first, md5_cksum="a")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    late = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host)
    FileFactory(result=late, md5_cksum="a")
    wrong = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host)
    FileFactory(result=wrong, md5_cksum="b")
    for _ in range(2):
        Workunit.objects.filter(pk=wu.pk).update(need_validate=True)
        validator.run_once(project=demo_project(), now=NOW + 1, batch_size=10)
    credit = wu.rsc_fpops_est * validator.COBBLESTONE_SCALE
    assert [(r.validate_state, r.granted_credit) for r in Result.objects.order_by("id")] == [
        (ValidateState.VALID, credit),
        (ValidateState.VALID, credit),
        (ValidateState.INVALID, 0.0),
    ]
    host.refresh_from_db()
    assert host.total_credit == pytest.approx(2 * credit)


def test_rule_3_7_transient_error_retries_later_and_numeric_tolerance(project):
    project.app.validator = "numeric"
    project.app.validate_tolerance = 1e-3
    project.app.save()
    wu = project.workunit(
        min_quorum=2, target_nresults=2, max_success_results=2, need_validate=True, transition_time=NOW + 10**6
    )
    for text in (b"1.0000 2.0", b"1.0004 2.0"):
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
        name = FileFactory(result=r).name
        upload_path(demo_project(), name).parent.mkdir(parents=True, exist_ok=True)
        upload_path(demo_project(), name).write_bytes(text)
    upload_path(demo_project(), "x").parent.rename(upload_path(demo_project(), "x").parent.with_name("away"))
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.need_validate, wu.transition_time) == (False, NOW + validator.RETRY_DELAY)
    assert set(wu.results.values_list("validate_state", flat=True)) == {ValidateState.INIT}
    upload_path(demo_project(), "x").parent.with_name("away").rename(upload_path(demo_project(), "x").parent)
    Workunit.objects.filter(pk=wu.pk).update(need_validate=True)
    validator.run_once(project=demo_project(), now=NOW + 1, batch_size=10)
    assert set(wu.results.values_list("validate_state", flat=True)) == {ValidateState.VALID}


@pytest.mark.parametrize(
    "texts, agree",
    [
        ((b"1.0000 2.0", b"1.0004 2.0"), True),  # within the tolerance (1e-3)
        ((b"1.0 2.0", b"1.002 2.0"), False),  # outside it, relative and absolute
        ((b"1.0 2.0", b"1.0 2.0 3.0"), False),  # a different count of numbers
        ((b"nan 1e300", b"NaN 1.0005e300"), True),  # NaN equals NaN; the tolerance is relative
        ((b"nan 1.0", b"1.0 1.0"), False),  # a NaN matches no number
        ((b"2.0 1.0", b"nan 1.0"), False),  # ... on either side
        ((b"inf", b"1e308"), False),  # nor an infinity a finite number
    ],
)
def test_rule_3_7_numeric_outputs_agree_only_within_the_tolerance(project, texts, agree):
    project.app.validator = "numeric"
    project.app.validate_tolerance = 1e-3
    project.app.save()
    wu = project.workunit(
        min_quorum=2, target_nresults=2, max_success_results=3, max_total_results=4, need_validate=True
    )
    for text in texts:
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
        FileFactory(result=r)
        upload_path(demo_project(), r.output_file_name(0)).parent.mkdir(parents=True, exist_ok=True)
        upload_path(demo_project(), r.output_file_name(0)).write_bytes(text)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.canonical_result_id is not None) is agree
    expected = ValidateState.VALID if agree else ValidateState.INCONCLUSIVE
    assert set(wu.results.values_list("validate_state", flat=True)) == {expected}
    assert wu.target_nresults == (2 if agree else 3)


def success_with_output(project, wu, md5, **fields):
    r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, **fields)
    FileFactory(result=r, md5_cksum=md5)
    return r


def test_rule_3_7_a_canonical_result_makes_every_unsent_result_didnt_need(project):
    # UNSENT only (reference/server.md §3.7, validator.cpp handle_wu): an INACTIVE result is
    # left for the transitioner, which ends it once the workunit is assimilated (§3.2 step 5);
    # the differential's seed 9101 validator cases 150 and 221 showed boincweb ending it too
    wu = project.workunit(
        min_quorum=2, target_nresults=4, max_success_results=4, max_total_results=6, need_validate=True
    )
    for _ in range(2):
        success_with_output(project, wu, "a", host=project.host())
    unsent = project.result(wu)
    inactive = project.result(wu, server_state=ServerState.INACTIVE)
    running = project.result(wu, server_state=ServerState.IN_PROGRESS, host=project.host())
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    unsent.refresh_from_db()
    assert (unsent.server_state, unsent.outcome) == (ServerState.OVER, Outcome.DIDNT_NEED)
    events = LifecycleEvent.objects.filter(result=unsent).order_by("field")
    assert [(e.actor, e.field, e.old, e.new) for e in events] == [
        ("validator", "outcome", Outcome.INIT, Outcome.DIDNT_NEED),
        ("validator", "server_state", ServerState.UNSENT, ServerState.OVER),
    ]
    for r, state in ((inactive, ServerState.INACTIVE), (running, ServerState.IN_PROGRESS)):
        r.refresh_from_db()
        assert (r.server_state, r.outcome) == (state, Outcome.INIT)
        assert not LifecycleEvent.objects.filter(result=r).exists()


@pytest.mark.parametrize(
    "transition_time, expected",
    [
        (INT_MAX, NOW),  # assimilated: waiting for nothing
        (NOW + 3600, NOW),  # waiting for a wingman's deadline
        (NOW - 60, NOW - 60),  # already due: stays due
    ],
)
@pytest.mark.parametrize("late_md5, state", [("a", ValidateState.VALID), ("b", ValidateState.INVALID)])
def test_rule_3_7_a_late_result_checked_against_the_canonical_makes_the_workunit_due_now(
    project, transition_time, expected, late_md5, state
):
    wu = project.workunit(transition_time=transition_time)
    canonical = success_with_output(project, wu, "a", validate_state=ValidateState.VALID)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical, need_validate=True)
    late = success_with_output(project, wu, late_md5)
    assert validator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    wu.refresh_from_db()
    assert (wu.transition_time, wu.need_validate) == (expected, False)
    assert Result.objects.get(pk=late.pk).validate_state == state


def test_rule_3_7_a_transient_error_reading_the_canonical_result_retries_the_late_one(project):
    unreadable = set()

    def init(result, files, app):
        if result.pk in unreadable:
            raise validator.TransientError("the canonical output is out of reach")
        return validator.bitwise_init(result, files, app)

    validator.register("flaky", init, validator.bitwise_compare)
    project.app.validator = "flaky"
    project.app.save()
    host = project.host()
    wu = project.workunit(transition_time=INT_MAX)
    # a late result gets the canonical result's granted credit (validator.cpp handle_wu)
    canonical = success_with_output(project, wu, "a", validate_state=ValidateState.VALID, host=host, granted_credit=1.0)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical, need_validate=True, canonical_credit=1.0)
    late = success_with_output(project, wu, "a", host=host)
    unreadable.add(canonical.pk)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    late.refresh_from_db()
    assert (wu.need_validate, wu.transition_time) == (False, NOW + validator.RETRY_DELAY)
    assert (late.validate_state, late.granted_credit) == (ValidateState.INIT, 0.0)
    assert not LifecycleEvent.objects.filter(result=late).exists()
    # six hours on, the transitioner sees the result still INIT and asks for validation again
    unreadable.clear()
    later = NOW + validator.RETRY_DELAY + 1
    run_pass("transitioner", project=demo_project(), now=later)
    assert Workunit.objects.get(pk=wu.pk).need_validate
    validator.run_once(project=demo_project(), now=later, batch_size=10)
    late.refresh_from_db()
    assert (late.validate_state, late.granted_credit) == (ValidateState.VALID, 1.0)
    assert Workunit.objects.get(pk=wu.pk).transition_time == later


def test_rule_3_7_a_pass_that_read_a_result_another_pass_validated_credits_nothing(project):
    """Credit follows only the rows a pass changed: two passes over one workunit, the first
    deciding on what it read before the second wrote."""
    host = project.host()
    wu = project.workunit(min_quorum=2, target_nresults=2, max_success_results=2, need_validate=True)
    for _ in range(2):
        success_with_output(project, wu, "a", host=host)
    stale_wu = Workunit.objects.select_related("app").get(pk=wu.pk)
    stale_results = list(stale_wu.results.order_by("id"))
    files = {f.result_id: [f] for f in File.objects.all()}
    stale = validator.Changes(project_id=demo_project().pk, now=NOW)
    validator.handle_wu(stale_wu, stale_results, validator.Checker(stale_wu.app, files), stale)
    assert validator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    validator.apply(stale, [stale_wu])
    credit = wu.rsc_fpops_est * validator.COBBLESTONE_SCALE
    host.refresh_from_db()
    assert host.total_credit == pytest.approx(2 * credit)
    assert (
        list(wu.results.values_list("validate_state", "granted_credit"))
        == [(ValidateState.VALID, pytest.approx(credit))] * 2
    )
    assert LifecycleEvent.objects.filter(field="validate_state").count() == 2


@pytest.mark.parametrize("returned", [1, -108, "error", False, True, 0.5])
def test_rule_3_8_a_handler_returning_an_error_stops_the_pass_and_changes_nothing(project, returned):
    assimilator.register("erring", lambda wu, c, files, now: returned)
    project.app.assimilator = "erring"
    project.app.save()
    wu = project.workunit(assimilate_state=AssimilateState.READY, transition_time=INT_MAX)
    r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=r)
    with pytest.raises(assimilator.HandlerError, match=f"returned {returned!r} for workunit"):
        assimilator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.assimilate_state, wu.transition_time) == (AssimilateState.READY, INT_MAX)
    assert not LifecycleEvent.objects.exists() and not AssimilatedResult.objects.exists()


@pytest.mark.parametrize(
    "canonical, error_mask, handler_result, state, mask_after",
    [
        (True, 0, None, AssimilateState.DONE, 0),
        (False, 0, None, AssimilateState.DONE, ErrorMask.NO_CANONICAL_RESULT),
        (False, ErrorMask.TOO_MANY_ERROR_RESULTS, None, AssimilateState.DONE, ErrorMask.TOO_MANY_ERROR_RESULTS),
        (True, 0, assimilator.DEFER_ASSIMILATION, AssimilateState.INIT, 0),
        (True, 0, 0, AssimilateState.DONE, 0),  # BOINC's success return
    ],
)
def test_rule_3_8_assimilation(project, canonical, error_mask, handler_result, state, mask_after):
    seen = []
    assimilator.register("test", lambda wu, c, files, now: seen.append(c) or handler_result)
    project.app.assimilator = "test"
    project.app.save()
    wu = project.workunit(assimilate_state=AssimilateState.READY, error_mask=error_mask)
    if canonical:
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
        Workunit.objects.filter(pk=wu.pk).update(canonical_result=r)
    assert assimilator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    wu.refresh_from_db()
    assert (wu.assimilate_state, wu.error_mask, wu.transition_time) == (state, mask_after, NOW)
    assert len(seen) == 1


@pytest.mark.parametrize(
    "transition_time, expected",
    [
        (INT_MAX, NOW),  # set by the validator on finding the canonical result
        (NOW - 60, NOW - 60),  # already due (a wingman past its deadline): stays due
    ],
)
def test_rule_3_8_assimilation_makes_the_workunit_due_and_never_postpones_it(project, transition_time, expected):
    wu = project.workunit(
        assimilate_state=AssimilateState.READY,
        error_mask=ErrorMask.TOO_MANY_ERROR_RESULTS,
        transition_time=transition_time,
    )
    assimilator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.assimilate_state, wu.transition_time) == (AssimilateState.DONE, expected)


@pytest.mark.parametrize(
    "outputs, transition_time, expected",
    [
        # no consensus, one more replica: due now ...
        ([b"1", b"2"], NOW + 3600, NOW),
        # ... but a workunit already due stays due
        ([b"1", b"2"], NOW - 60, NOW - 60),
        # too many successes: the error is the transitioner's to clean up, now or earlier
        ([b"1", b"2", b"3"], NOW + 3600, NOW),
        ([b"1", b"2", b"3"], NOW - 60, NOW - 60),
        # canonical found: never, until the assimilator is done (BOINC, §3.7 step 4)
        ([b"1", b"1"], NOW - 60, INT_MAX),
    ],
)
def test_rule_3_7_validation_never_postpones_a_due_workunit(project, outputs, transition_time, expected):
    wu = project.workunit(
        min_quorum=2,
        target_nresults=2,
        max_success_results=2,
        max_total_results=6,
        max_error_results=3,
        need_validate=True,
        transition_time=transition_time,
    )
    for data in outputs:
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=project.host())
        FileFactory(result=r, md5_cksum=hashlib.md5(data).hexdigest())
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    assert Workunit.objects.get(pk=wu.pk).transition_time == expected


def test_rule_3_8_a_failing_handler_stops_the_pass_and_changes_nothing(project):
    def broken(wu, canonical, files, now):
        raise RuntimeError("handler broke")

    assimilator.register("broken", broken)
    project.app.assimilator = "broken"
    project.app.save()
    wu = project.workunit(assimilate_state=AssimilateState.READY)
    with pytest.raises(RuntimeError):
        assimilator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert wu.assimilate_state == AssimilateState.READY
    assert not LifecycleEvent.objects.exists()


@pytest.mark.parametrize(
    "setup, state",
    [
        ("present", FileDeleteState.DONE),
        ("already gone", FileDeleteState.DONE),
        ("directory missing", FileDeleteState.ERROR),
    ],
)
def test_rule_3_9_file_deletion(project, data_dirs, setup, state):
    wu = project.workunit(file_delete_state=FileDeleteState.READY)
    r = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, file_delete_state=FileDeleteState.READY
    )
    out = FileFactory(result=r)
    inp = FileFactory(name="in.dat")
    wu.input_files.add(inp)
    for path in (upload_path(demo_project(), out.name), download_path(demo_project(), inp.name)):
        path.parent.mkdir(parents=True, exist_ok=True)
        if setup == "present":
            path.write_bytes(b"x")
    if setup == "directory missing":
        upload_path(demo_project(), out.name).parent.rmdir()
        download_path(demo_project(), inp.name).parent.rmdir()
    assert file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8) == 2
    r.refresh_from_db()
    wu.refresh_from_db()
    assert (r.file_delete_state, wu.file_delete_state) == (state, state)
    assert not upload_path(demo_project(), out.name).exists()
    if state == FileDeleteState.ERROR:
        # retried an hour later, once the directories are back
        upload_path(demo_project(), out.name).parent.mkdir()
        download_path(demo_project(), inp.name).parent.mkdir()
        file_deleter.run_once(project=demo_project(), now=NOW + file_deleter.ERROR_INTERVAL - 1, batch_size=8)
        assert Result.objects.get(pk=r.pk).file_delete_state == FileDeleteState.ERROR
        DaemonStatus.objects.filter(name="file_deleter").update(last_retry_time=NOW)
        file_deleter.run_once(project=demo_project(), now=NOW + file_deleter.ERROR_INTERVAL, batch_size=8)
        assert Result.objects.get(pk=r.pk).file_delete_state == FileDeleteState.DONE


def test_rule_3_9_an_abandoned_partial_upload_is_deleted_with_the_results_files(project, data_dirs):
    wu = project.workunit()
    r = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.NO_REPLY, file_delete_state=FileDeleteState.READY
    )
    other = project.result(wu, server_state=ServerState.IN_PROGRESS)
    for result in (r, other):
        part = partial_upload_path(demo_project(), result.output_file_name(0))
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(b"half an upload")
    assert file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8) == 1
    assert Result.objects.get(pk=r.pk).file_delete_state == FileDeleteState.DONE
    assert not partial_upload_path(demo_project(), r.output_file_name(0)).exists()
    assert partial_upload_path(demo_project(), other.output_file_name(0)).exists()  # still uploading


def test_rule_3_2_step_9_a_timed_out_results_abandoned_upload_is_deleted_when_asked(project, settings, tmp_path):
    """With delete_abandoned_outputs on: a host takes the job, uploads part of its output and
    vanishes: the result times out, a replica is made and validated, and once the workunit is
    assimilated the transitioner gives the NO_REPLY result's files to the file deleter, which
    deletes the part. The host's late report afterwards brings a whole output, which is
    deleted in its turn."""
    config_xml = tmp_path / "config.xml"
    config_xml.write_text("<boinc><config><delete_abandoned_outputs/></config></boinc>")
    settings.BOINC_CONFIG_XML = str(config_xml)
    [wu] = work_generator.create_work(project.app, ["job"], now=NOW)
    daemons(NOW + 1)
    vanishing, reliable = project.host(), project.host()
    [job] = handle_request(work_request(vanishing), project=demo_project(), now=NOW + 2).results
    output = job.output_files[0].name
    part = partial_upload_path(demo_project(), output)
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"half an up")
    timed_out = Result.objects.get(name=job.name)
    after_deadline = timed_out.report_deadline + 1
    daemons(after_deadline)
    timed_out.refresh_from_db()
    assert (timed_out.outcome, timed_out.file_delete_state) == (Outcome.NO_REPLY, FileDeleteState.INIT)
    compute(reliable, after_deadline + 1)
    for t in range(after_deadline + 3, after_deadline + 8):
        daemons(t)
    wu.refresh_from_db()
    timed_out.refresh_from_db()
    assert wu.assimilate_state == AssimilateState.DONE
    assert timed_out.file_delete_state == FileDeleteState.DONE
    assert not part.exists()
    assert [
        (e.actor, e.old, e.new)
        for e in LifecycleEvent.objects.filter(result=timed_out, field="file_delete_state").order_by("id")
    ] == [
        ("transitioner", FileDeleteState.INIT, FileDeleteState.READY),
        ("file_deleter", FileDeleteState.READY, FileDeleteState.DONE),
    ]
    # the late report: accepted (reference/server.md §3.5), its files to be deleted again
    late = after_deadline + 100
    handle_request(
        work_request(
            vanishing,
            cpu_req_secs=0,
            results=[
                ReportedResult(
                    job.name, final_elapsed_time=10, final_cpu_time=10, output_files=[ReportedFile(output, data=b"job")]
                )
            ],
        ),
        project=demo_project(),
        now=late,
    )
    timed_out.refresh_from_db()
    assert (timed_out.outcome, timed_out.file_delete_state) == (Outcome.SUCCESS, FileDeleteState.INIT)
    assert upload_path(demo_project(), output).exists()
    for t in range(late + 1, late + 6):
        daemons(t)
    timed_out.refresh_from_db()
    assert (timed_out.validate_state, timed_out.file_delete_state) == (ValidateState.TOO_LATE, FileDeleteState.DONE)
    assert not upload_path(demo_project(), output).exists()


def test_rule_3_9_shared_and_nodelete_inputs_are_kept(project):
    shared = FileFactory(name="shared.dat")
    kept = project.workunit(name="keep_nodelete", file_delete_state=FileDeleteState.READY)
    done = project.workunit(file_delete_state=FileDeleteState.READY)
    busy = project.workunit()
    own = FileFactory(name="own.dat")
    for wu in (kept, done, busy):
        wu.input_files.add(shared)
    kept.input_files.add(own)
    for f in ("shared.dat", "own.dat"):
        download_path(demo_project(), f).parent.mkdir(parents=True, exist_ok=True)
        download_path(demo_project(), f).write_bytes(b"x")
    file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8)
    assert download_path(demo_project(), "shared.dat").exists() and download_path(demo_project(), "own.dat").exists()
    assert set(Workunit.objects.values_list("file_delete_state", flat=True)) == {
        FileDeleteState.DONE,
        FileDeleteState.INIT,
    }


def test_rule_3_1_work_generator_tops_up_unsent_results(project):
    project.app.unsent_target = 5
    project.app.save()
    assert work_generator.run_once(project=demo_project(), now=NOW, batch_size=100) == 5
    # waits for the transitioner to make the first results before generating more
    assert work_generator.run_once(project=demo_project(), now=NOW + 1, batch_size=100) == 0
    run_pass("transitioner", project=demo_project(), now=NOW + 2)
    assert Result.objects.filter(server_state=ServerState.UNSENT).count() == 5
    assert work_generator.run_once(project=demo_project(), now=NOW + 3, batch_size=100) == 0
    Result.objects.filter(pk__in=Result.objects.all()[:2].values("pk")).update(server_state=ServerState.IN_PROGRESS)
    assert work_generator.run_once(project=demo_project(), now=NOW + 4, batch_size=100) == 2


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(target_nresults=3, max_success_results=2), "target_nresults must not exceed"),
        (dict(max_error_results=9), "max_error_results must not exceed max_total_results"),
        (dict(rsc_fpops_est=0), "rsc_fpops_est must be positive"),
        (dict(colour="red"), "unknown workunit parameter"),
    ],
)
def test_rule_3_1_create_work_refuses_what_boinc_refuses(project, overrides, message):
    with pytest.raises(work_generator.CreateWorkError, match=message):
        work_generator.create_work(project.app, ["x"], now=NOW, **overrides)
    assert not Workunit.objects.exists()


def test_work_for_one_input_file_on_demand(project):
    big = FileFactory(name="big.dat", sticky=True)
    wus = work_generator.create_work_for_file(project.app, big, now=NOW, count=2)
    assert [wu.name for wu in wus] == [f"big.dat__uppercase_{NOW}_0", f"big.dat__uppercase_{NOW}_1"]
    assert all(list(wu.input_files.all()) == [big] for wu in wus)


def test_client_errors_retry_until_max_error_results(project):
    [wu] = work_generator.create_work(project.app, ["bad"], now=NOW)
    for t in range(NOW + 1, NOW + 40, 4):
        daemons(t)
        # a new volunteer each time: one result per user per workunit
        compute(project.host(), t + 1, client_state=ClientState.COMPUTE_ERROR, exit_status=1)
    wu.refresh_from_db()
    assert wu.error_mask & ErrorMask.TOO_MANY_ERROR_RESULTS
    assert wu.results.count() == 3 and wu.assimilate_state == AssimilateState.DONE


def test_rule_3_9_a_result_without_outputs_needs_no_upload_directory(project, data_dirs):
    r = project.result(
        project.workunit(),
        server_state=ServerState.OVER,
        outcome=Outcome.NO_REPLY,
        file_delete_state=FileDeleteState.READY,
    )
    assert not upload_path(demo_project(), r.output_file_name(0)).parent.exists()
    assert file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8) == 1
    assert Result.objects.get(pk=r.pk).file_delete_state == FileDeleteState.DONE
