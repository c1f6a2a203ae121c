"""CreditNew and the validator's credit options, each number worked by hand from BOINC's
sched/credit.cpp (get_pfc, assign_credit_set, pegged_average, low_average, update_av_scales,
write_modified_app_versions), lib/average.h (AVERAGE::update) and sched/validator.cpp
(handle_wu: credit_from_wu, credit_from_runtime, no_credit, max_granted_credit).

Credit is 200 / 86400e9 per FLOP: 432e9 FLOPs are one credit."""

from types import SimpleNamespace

import pytest

from backend.daemons import credit, host_app_version, validator
from backend.models import (
    CreditHistory,
    Host,
    HostAppVersion,
    Outcome,
    Result,
    ServerState,
    TeamAppCredit,
    UserAppCredit,
    UserCredit,
    ValidateState,
    Workunit,
)
from backend.server_config import ConfigError, read_config_xml
from tests.factories import NOW, AppVersionFactory, FileFactory, TeamFactory, UserCreditFactory, demo_project

FLOPS_PER_CREDIT = 432e9
EST = 1e12  # rsc_fpops_est of the workunits below


def test_pegged_average_weighs_values_by_their_nearness_to_the_anchor():
    # weights 1/(10 + 10) = 0.05 and 1/(10 + 30) = 0.025: (4.5 + 3.25) / 0.075
    assert credit.pegged_average([90.0, 130.0], 100.0) == pytest.approx(103.3333333)
    assert credit.pegged_average([42.0], 100.0) == 42.0


def test_low_average_leans_towards_the_low_values():
    # (10 x 30 + 30 x 10) / (1 x 40)
    assert credit.low_average([10.0, 30.0]) == pytest.approx(15.0)
    # sum 60: (10x50 + 20x40 + 30x30) / (2 x 60) = 2200 / 120
    assert credit.low_average([10.0, 20.0, 30.0]) == pytest.approx(18.3333333)


def test_averages_are_a_mean_then_exponential_with_samples_cut_at_ten_times():
    avg, n = 0.0, 0.0
    for sample in (2.0, 4.0):
        avg, n = host_app_version.running_average(avg, n, sample, host_app_version.HAV_AVG)
    assert (avg, n) == (pytest.approx(3.0), 2)
    # an app version past AV_AVG_THRESH (100): weight 0.001
    assert host_app_version.running_average(1.0, 100, 2.0, credit.AV_AVG) == (pytest.approx(1.001), 101)
    # 100 is cut to 10 x 3, the third sample of a mean: 3 + (30 - 3) / 3
    assert host_app_version.running_average(3.0, 2, 100.0, host_app_version.HAV_AVG)[0] == pytest.approx(12.0)


def row(**fields):
    defaults = dict(
        runtime_outlier=False, elapsed_time=0.0, cpu_time=0.0, flops_estimate=0.0, sent_time=NOW - 3600, pk=1
    )
    return SimpleNamespace(**(defaults | fields))


WU = SimpleNamespace(rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, canonical_credit=0.0)
APP = SimpleNamespace(min_avg_pfc=1.0, host_scale_check=False)


def version(**fields):
    return SimpleNamespace(**(dict(pk=1, pfc_n=200.0, pfc_avg=2.0, pfc_scale=0.5) | fields))


def test_a_normal_result_is_scaled_by_its_version_and_host():
    # raw PFC 1000 s x 2e9 = 2e12; host scale 2.0 / 4.0 = 0.5; version scale 0.5: 5e11
    hav = credit.HavPfc(pfc_n=12, pfc_avg=4.0)
    samples = credit.Samples()
    pfc, mode, sample = credit.get_pfc(row(elapsed_time=1000.0, flops_estimate=2e9), WU, APP, version(), hav, samples)
    assert (pfc, mode, sample) == (pytest.approx(5e11), credit.NORMAL, pytest.approx(2.0))
    # the host app version takes the ratio 2e12 / 1e12 into its mean of 13: 4 + (2 - 4) / 13
    assert (hav.pfc_n, hav.pfc_avg) == (13, pytest.approx(3.8461538))
    assert samples.pfc == {1: [pytest.approx(2.0)]}
    assert samples.credit == {1: [(pytest.approx(5e11 / FLOPS_PER_CREDIT), NOW - 3600)]}


@pytest.mark.parametrize(
    "hav_n, version_n, why",
    [
        (9, 200, "fewer than MIN_HOST_SAMPLES (10) host samples"),
        (12, 99, "fewer than MIN_VERSION_SAMPLES (100) version samples"),
    ],
)
def test_without_enough_samples_there_is_no_host_scale(hav_n, version_n, why):
    hav = credit.HavPfc(pfc_n=hav_n, pfc_avg=4.0)
    pfc, mode, _ = credit.get_pfc(
        row(elapsed_time=1000.0, flops_estimate=2e9), WU, APP, version(pfc_n=version_n), hav, credit.Samples()
    )
    assert (pfc, mode) == (pytest.approx(1e12), credit.APPROX), why  # 2e12 x 0.5 only


def test_host_scale_check_waits_for_ten_consecutive_valid_results():
    app = SimpleNamespace(min_avg_pfc=1.0, host_scale_check=True)
    for valid, expected in ((9, 1e12), (10, 5e11)):
        hav = credit.HavPfc(pfc_n=12, pfc_avg=4.0, consecutive_valid=valid)
        pfc, _, _ = credit.get_pfc(
            row(elapsed_time=1000.0, flops_estimate=2e9), WU, app, version(), hav, credit.Samples()
        )
        assert pfc == pytest.approx(expected)


def test_the_host_scale_is_at_most_ten():
    hav = credit.HavPfc(pfc_n=12, pfc_avg=0.01)  # 2.0 / 0.01 = 200, cut to 10
    pfc, _, _ = credit.get_pfc(
        row(elapsed_time=1000.0, flops_estimate=3e9), WU, APP, version(pfc_scale=0.0), hav, credit.Samples()
    )
    assert pfc == pytest.approx(3e12 * 10)


@pytest.mark.parametrize(
    "fields",
    [
        dict(runtime_outlier=True, elapsed_time=1000.0, flops_estimate=2e9),
        dict(elapsed_time=1000.0, flops_estimate=0.0),  # no estimate: 4.3e9, an outlier
        dict(elapsed_time=1000.0, flops_estimate=1e9),  # the old default: likewise
        dict(elapsed_time=1e6, flops_estimate=2e9),  # ratio 2000: sane (up to 1e4)...
    ],
)
def test_outliers_are_credited_but_left_out_of_the_averages(fields):
    hav = credit.HavPfc(pfc_n=3, pfc_avg=1.0)
    samples = credit.Samples()
    pfc, _, sample = credit.get_pfc(row(**fields), WU, APP, version(), hav, samples)
    flops = fields["flops_estimate"] if fields["flops_estimate"] not in (0.0, 1e9) else 4.3e9
    assert pfc == pytest.approx(fields["elapsed_time"] * flops * 0.5)
    outlier = fields.get("runtime_outlier") or flops == 4.3e9
    assert (sample is None) == bool(outlier)
    assert (hav.pfc_n == 3) == bool(outlier)
    assert bool(samples.pfc) != bool(outlier)


def test_an_insane_ratio_is_left_out_of_the_averages():
    hav = credit.HavPfc(pfc_n=3, pfc_avg=1.0)
    samples = credit.Samples()
    # 1e12 x 2e9 / 1e12 = 2e9: far from 1 (is_pfc_sane)
    credit.get_pfc(row(elapsed_time=1e12, flops_estimate=2e9), WU, APP, version(), hav, samples)
    assert (hav.pfc_n, samples.pfc) == (3, {})


def test_the_workunit_credit_is_the_pegged_average_of_the_normal_results():
    hav = credit.HavPfc(pfc_n=12, pfc_avg=2.0)  # host scale 1
    results = [
        (row(pk=i, elapsed_time=t, flops_estimate=2e9), version(pfc_scale=1.0), credit.HavPfc(hav.pfc_n, hav.pfc_avg))
        for i, t in ((1, 450.0), (2, 650.0))
    ]
    got, hav_samples = credit.assign_credit_set(WU, APP, results, credit.CreditOptions(), credit.Samples())
    # PFCs 9e11 and 1.3e12 about the anchor 1e12: 1.0333e12
    assert got == pytest.approx(1.0333333e12 / FLOPS_PER_CREDIT)
    assert [s for _, s in hav_samples] == [pytest.approx(0.9), pytest.approx(1.3)]


def test_one_normal_result_counts_three_times_among_the_approximate_ones():
    normal = (row(pk=1, elapsed_time=450.0, flops_estimate=2e9), version(pfc_scale=1.0), credit.HavPfc(12, 2.0))
    approx = (row(pk=2, elapsed_time=650.0, flops_estimate=2e9), version(pfc_scale=1.0), credit.HavPfc(0, 0.0))
    got, _ = credit.assign_credit_set(WU, APP, [normal, approx], credit.CreditOptions(), credit.Samples())
    # approx [1.3e12, 9e11, 9e11]: weights 1/(1e11+3e11), 1/(1e11+1e11) twice
    w1, w2 = 1 / 4e11, 1 / 2e11
    expected = (1.3e12 * w1 + 2 * 9e11 * w2) / (w1 + 2 * w2)
    assert got == pytest.approx(expected / FLOPS_PER_CREDIT)


def test_pfc_is_cut_to_the_bound_and_results_over_max_granted_credit_are_left_out():
    huge = (row(pk=1, elapsed_time=1e5, flops_estimate=2e9), version(pfc_scale=1.0), None)
    got, _ = credit.assign_credit_set(
        WU, APP, [(huge[0], huge[1], credit.HavPfc())], credit.CreditOptions(), credit.Samples()
    )
    assert got == pytest.approx(10 * EST / FLOPS_PER_CREDIT)  # 2e14 cut to 1e13
    capped = credit.CreditOptions(max_granted_credit=20.0)  # 1e13 is 23.1 credit
    got, _ = credit.assign_credit_set(WU, APP, [(huge[0], huge[1], credit.HavPfc())], capped, credit.Samples())
    assert got == pytest.approx(EST / FLOPS_PER_CREDIT)  # none left: the estimate


def test_a_result_without_a_host_app_version_gets_the_estimate_times_min_avg_pfc():
    app = SimpleNamespace(min_avg_pfc=0.5, host_scale_check=False)
    pfc, mode, _ = credit.get_pfc(
        row(elapsed_time=1000.0, flops_estimate=2e9), WU, app, version(), None, credit.Samples()
    )
    assert (pfc, mode) == (5e11, credit.WU_EST)
    # anonymous platform (no app version here): the estimate too
    pfc, mode, _ = credit.get_pfc(row(elapsed_time=1000.0, flops_estimate=2e9), WU, app, None, None, credit.Samples())
    assert (pfc, mode) == (5e11, credit.APPROX)


def test_credit_from_runtime_is_the_low_average_of_the_runtime_credit():
    viable = [
        row(elapsed_time=216.0, flops_estimate=2e9),  # 4.32e11: 1 credit
        row(elapsed_time=648.0, flops_estimate=2e9),  # 3 credits
        row(elapsed_time=0.0, flops_estimate=2e9),
    ]  # 0: left out
    options = credit.CreditOptions(credit_from_runtime=True)
    assert credit.credit_from_runtime(WU, viable, options) == pytest.approx(1.5)
    # a run over twice the bound counts as the bound
    assert credit.credit_from_runtime(WU, [row(elapsed_time=1e5, flops_estimate=2e9)], options) == pytest.approx(
        10 * EST / FLOPS_PER_CREDIT
    )


def test_update_av_scales_scales_versions_to_their_average(project):
    from backend.models import AppVersion

    slow = AppVersionFactory(app=project.app, version_num=200, pfc_n=150.0, pfc_avg=2.0)
    AppVersion.objects.filter(pk=project.version.pk).update(pfc_n=150.0, pfc_avg=1.0)
    assert credit.update_av_scales() == [project.app.pk]
    project.app.refresh_from_db()
    # the sample-weighted CPU average (150 x 1 + 150 x 2) / 300 = 1.5
    assert project.app.min_avg_pfc == pytest.approx(1.5)
    assert AppVersion.objects.get(pk=project.version.pk).pfc_scale == pytest.approx(1.5)
    assert AppVersion.objects.get(pk=slow.pk).pfc_scale == pytest.approx(0.75)


def test_one_cpu_version_alone_is_not_scaled(project):
    from backend.models import AppVersion

    AppVersion.objects.filter(pk=project.version.pk).update(pfc_n=150.0, pfc_avg=1.0)
    assert credit.update_av_scales() == []


# --- through the validator ----------------------------------------------------------------


def valid_job(project, host, elapsed, *, outlier=False, **wu_fields):
    """A workunit of quorum 1 with one successful result of ``elapsed`` s at 2 GFLOPS."""
    wu = project.workunit(rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, need_validate=True, **wu_fields)
    r = project.result(
        wu,
        server_state=ServerState.OVER,
        outcome=Outcome.SUCCESS,
        host=host,
        app_version=project.version,
        elapsed_time=elapsed,
        flops_estimate=2e9,
        runtime_outlier=outlier,
        sent_time=NOW - 86400,
        received_time=NOW - 3600,
    )
    FileFactory(result=r, md5_cksum="a")
    return wu, r


def test_the_host_scale_converges_once_the_host_has_ten_samples(project):
    """A host whose runs claim twice the workunit's estimate (1000 s at 2 GFLOPS for 1e12):
    its first ten are credited as claimed (approximate, no host scale yet, version scale 1);
    from the eleventh its host scale, the version's average / the host's 2.0, about halves
    the claim, back to about the estimate's credit. The version's average, 100 samples of
    1.0 at first, takes each pass's sample 2.0 at weight 0.001: 2 - 0.999^k after k."""
    from backend.models import AppVersion

    AppVersion.objects.filter(pk=project.version.pk).update(pfc_n=100.0, pfc_avg=1.0, pfc_scale=1.0)
    host = project.host()
    granted = []
    for i in range(12):
        _, r = valid_job(project, host, 1000.0)
        validator.run_once(project=demo_project(), now=NOW + i, batch_size=10)
        r.refresh_from_db()
        granted.append(r.granted_credit)
    claimed = 2e12 / FLOPS_PER_CREDIT

    def version_avg(k):
        return 2 - 0.999**k

    assert granted == [pytest.approx(claimed)] * 10 + [
        pytest.approx(claimed * version_avg(10) / 2.0),
        pytest.approx(claimed * version_avg(11) / 2.0),
    ]
    hav = HostAppVersion.objects.get(host=host)
    assert (hav.pfc_n, hav.pfc_avg) == (12, pytest.approx(2.0))
    # the version: 100 samples of 1.0, then twelve of 2.0 at weight 0.001
    v = AppVersion.objects.get(pk=project.version.pk)
    assert v.pfc_n == 112 and v.pfc_avg == pytest.approx(version_avg(12))
    host.refresh_from_db()
    assert host.total_credit == pytest.approx(sum(granted))


def test_a_runtime_outlier_is_credited_but_left_out_of_the_averages(project):
    from backend.models import AppVersion

    host = project.host()
    _, first = valid_job(project, host, 500.0)  # ratio 1.0
    _, outlier = valid_job(project, host, 5000.0, outlier=True)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    outlier.refresh_from_db()
    assert outlier.granted_credit == pytest.approx(1e13 / FLOPS_PER_CREDIT)
    hav = HostAppVersion.objects.get(host=host)
    assert (hav.pfc_n, hav.pfc_avg) == (1, pytest.approx(1.0))
    v = AppVersion.objects.get(pk=project.version.pk)
    assert (v.pfc_n, v.pfc_avg) == (1, pytest.approx(1.0))


def test_two_results_are_granted_the_pegged_average_and_the_owner_and_team_get_it(project):
    team = TeamFactory(name="crunchers")
    a, b = project.host(), project.host()
    for host in (a, b):
        UserCreditFactory(user=host.owner, team=team)
    wu = project.workunit(
        rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, min_quorum=2, target_nresults=2, need_validate=True
    )
    for host, elapsed in ((a, 450.0), (b, 650.0)):
        r = project.result(
            wu,
            server_state=ServerState.OVER,
            outcome=Outcome.SUCCESS,
            host=host,
            app_version=project.version,
            elapsed_time=elapsed,
            flops_estimate=2e9,
            sent_time=NOW - 86400,
            received_time=NOW - 3600,
        )
        FileFactory(result=r, md5_cksum="a")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    # both approximate (no samples yet), no version scale: PFCs 9e11 and 1.3e12
    expected = 1.0333333e12 / FLOPS_PER_CREDIT
    wu.refresh_from_db()
    assert wu.canonical_credit == pytest.approx(expected)
    assert list(Result.objects.values_list("granted_credit", flat=True)) == [pytest.approx(expected)] * 2
    team.refresh_from_db()
    assert team.total_credit == pytest.approx(2 * expected)
    # update_average: the first credit, over the day since the result was sent, then the
    # second at the same instant (a back-to-back update adds ln 2 x work x day / half-life)
    first = expected / 1.0
    assert team.expavg_credit == pytest.approx(first + 0.6931471805599453 * expected / 7)
    history = CreditHistory.objects.get(kind="team", owner_id=team.pk)
    assert (history.day, history.total_credit) == (NOW // 86400, pytest.approx(2 * expected))


@pytest.mark.parametrize(
    "options, granted",
    [
        (dict(credit_from_wu=True), 7.0),
        (dict(credit_from_runtime=True), 1000 * 2e9 / FLOPS_PER_CREDIT),
        # the result's 4.63 is over the cap and left out, leaving the estimate 2.31, cut to 2
        (dict(max_granted_credit=2.0), 2.0),
    ],
)
def test_the_options_replace_the_credit(project, options, granted):
    host = project.host()
    wu, r = valid_job(project, host, 1000.0, canonical_credit=7.0)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10, **options)
    r.refresh_from_db()
    wu.refresh_from_db()
    assert r.granted_credit == pytest.approx(granted) == wu.canonical_credit


def test_no_credit_grants_nothing_but_still_keeps_the_averages_and_turnaround(project):
    host = project.host()
    _, r = valid_job(project, host, 500.0)
    Result.objects.filter(pk=r.pk).update(granted_credit=0.5)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10, no_credit=True)
    r.refresh_from_db()
    host.refresh_from_db()
    assert (r.validate_state, r.granted_credit) == (ValidateState.VALID, 0.5)
    assert (host.total_credit, host.avg_turnaround) == (0.0, 86400 - 3600)
    assert Workunit.objects.get(pk=r.workunit_id).canonical_credit == 0.0
    assert HostAppVersion.objects.get(host=host).pfc_n == 1


def test_credit_by_app_keeps_users_and_teams_credit_per_app(project):
    team = TeamFactory(name="crunchers")
    host = project.host()
    UserCreditFactory(user=host.owner, team=team)
    for _ in range(2):
        valid_job(project, host, 500.0)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10, credit_by_app=True)
    one = EST / FLOPS_PER_CREDIT
    mine = UserAppCredit.objects.get(user=host.owner, app=project.app)
    theirs = TeamAppCredit.objects.get(team=team, app=project.app)
    for row_ in (mine, theirs):
        assert (row_.njobs, row_.total) == (2, pytest.approx(2 * one))


def test_the_credit_options_are_read_from_the_validators_command_line_in_config_xml():
    config = read_config_xml(
        "<boinc><config></config><daemons><daemon><cmd>sample_bitwise_validator --app x "
        "--credit_from_runtime --max_granted_credit 500</cmd></daemon>"
        "<daemon><cmd>feeder -d 3 --no_credit</cmd></daemon></daemons></boinc>"
    )
    assert (config.credit_from_runtime, config.max_granted_credit, config.no_credit) == (True, 500.0, False)
    assert read_config_xml("<config><credit_by_app/></config>").credit_by_app
    with pytest.raises(ConfigError, match="max_granted_credit"):
        read_config_xml(
            "<boinc><config/><daemons><daemon><cmd>validator --max_granted_credit lots</cmd></daemon></daemons></boinc>"
        )
    with pytest.raises(ConfigError, match="credit_from_runtime needs max_granted_credit"):
        read_config_xml(
            "<boinc><config/><daemons><daemon><cmd>validator --credit_from_runtime"
            " --max_granted_credit 0</cmd></daemon></daemons></boinc>"
        )


def test_hosts_without_an_owner_credit_row_get_one(project):
    host = project.host()
    valid_job(project, host, 500.0)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    assert UserCredit.objects.get(user=host.owner).total_credit == pytest.approx(EST / FLOPS_PER_CREDIT)
    assert Host.objects.get(pk=host.pk).expavg_credit > 0


@pytest.mark.parametrize("last_copy_wins, valid", [(False, 2), (True, 1)])
def test_two_results_of_one_host_checked_together_change_its_record_once_in_boincs_way(project, last_copy_wins, valid):
    """validator.cpp handle_wu reads one host app version copy per result and writes each
    whole: of two results of one host, only the last one's is_valid is kept (departure 10,
    option hav_last_copy_wins)."""
    host = project.host()
    validate_in_one_pass(project, [(host, "a"), (host, "a")], quota=0, last_copy_wins=last_copy_wins)
    hav = HostAppVersion.objects.get(host=host)
    # the PFC average always takes the last copy: one sample of 1.0
    assert (hav.consecutive_valid, hav.pfc_n, hav.pfc_avg) == (valid, 1, pytest.approx(1.0))


def validate_in_one_pass(project, outputs, *, quota, last_copy_wins):
    """One validator pass over a quorum-2 workunit with a successful result per (host,
    output checksum) of ``outputs``, in that order."""
    wu = project.workunit(
        rsc_fpops_est=EST, rsc_fpops_bound=10 * EST, min_quorum=2, target_nresults=len(outputs), need_validate=True
    )
    for who, output in outputs:
        r = project.result(
            wu,
            server_state=ServerState.OVER,
            outcome=Outcome.SUCCESS,
            host=who,
            app_version=project.version,
            elapsed_time=500.0,
            flops_estimate=2e9,
            sent_time=NOW - 86400,
            received_time=NOW,
        )
        FileFactory(result=r, md5_cksum=output)
    validator.run_once(
        project=demo_project(), now=NOW, batch_size=10, daily_result_quota=quota, hav_last_copy_wins=last_copy_wins
    )


@pytest.mark.parametrize("last_copy_wins, record", [(False, (0, 1)), (True, (1, 1))])
def test_an_invalid_result_that_changes_nothing_leaves_its_hosts_other_copy_written(project, last_copy_wins, record):
    """Of a host's valid and invalid results in one workunit, BOINC's validator writes each
    copy only where it differs from the record as read (update_validator): is_invalid on a
    record with no run of valid results changes nothing, so the valid copy's write stands
    (the differential's seed 9303 validator case 125)."""
    host, other = project.host(), project.host()
    # host's first result matches other's (valid), its second matches neither (invalid)
    validate_in_one_pass(project, [(host, "a"), (host, "c"), (other, "a")], quota=500, last_copy_wins=last_copy_wins)
    assert sorted(Result.objects.filter(host=host).values_list("validate_state", flat=True)) == sorted(
        [ValidateState.VALID, ValidateState.INVALID]
    )
    hav = HostAppVersion.objects.get(host=host)
    assert (hav.consecutive_valid, hav.max_jobs_per_day) == record


@pytest.mark.parametrize("last_copy_wins, record", [(False, (0, 4)), (True, (0, 3))])
def test_an_invalid_result_ending_a_run_writes_its_copy_and_its_pfc_as_read(project, last_copy_wins, record):
    """Of a host's valid and invalid results in one workunit, the invalid one's is_invalid
    ends the record's run of valid results, so BOINC's validator writes that copy whole after
    the valid one's: the PFC average the valid result added is lost with it (departure 10,
    option hav_last_copy_wins; the differential's seed 9606 validator case 218)."""
    host, other = project.host(), project.host()
    HostAppVersion.objects.create(
        host=host, project=host.project, app_version=project.version, consecutive_valid=3, pfc_n=3, pfc_avg=1.0
    )
    # host's first result matches other's (valid), its second matches neither (invalid)
    validate_in_one_pass(project, [(host, "a"), (host, "c"), (other, "a")], quota=500, last_copy_wins=last_copy_wins)
    hav = HostAppVersion.objects.get(host=host)
    assert (hav.consecutive_valid, hav.pfc_n) == record
