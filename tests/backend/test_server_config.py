"""The server options read from a BOINC config.xml (backend.server_config)."""

import subprocess
import sys
from pathlib import Path

import pytest

from backend.daemons.sched_types import SchedulerConfig
from backend.server_config import ConfigError, project_config, read_config_xml

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a_config_xml_sets_options_by_boincs_names_and_units():
    config = read_config_xml("""<boinc><config>
        <db_name>project</db_name>
        <report_grace_period_hours>2</report_grace_period_hours>
        <daily_result_quota>8</daily_result_quota>
        <max_wus_to_send>3</max_wus_to_send>
        <one_result_per_user_per_wu>0</one_result_per_user_per_wu>
        <resend_lost_results/>
        <gpu_multiplier>2</gpu_multiplier>
        <seed003_infeasible_queue/>
        <infeasible_timeout_days>1.5</infeasible_timeout_days>
    </config></boinc>""")
    assert (
        config.report_grace_period,
        config.daily_result_quota,
        config.max_wus_to_send,
        config.one_result_per_user_per_wu,
        config.resend_lost_results,
        config.gpu_multiplier,
        config.seed003_infeasible_queue,
        config.infeasible_timeout,
    ) == (7200, 8, 3, False, True, 2, True, 129600)
    # what the file does not set keeps SchedulerConfig's default
    assert config.send_result_abort is SchedulerConfig().send_result_abort


def test_options_the_file_does_not_set_take_the_overrides(tmp_path):
    path = tmp_path / "config.xml"
    path.write_text("<boinc><config><max_wus_to_send>4</max_wus_to_send></config></boinc>")
    config = read_config_xml(path, daily_result_quota=7, max_wus_to_send=9)
    assert (config.daily_result_quota, config.max_wus_to_send) == (7, 4)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "<boinc><config><daily_result_quota>-1</daily_result_quota></config></boinc>",
            "daily_result_quota must be a whole number",
        ),
        (
            "<boinc><config><max_wus_to_send>many</max_wus_to_send></config></boinc>",
            "<max_wus_to_send> must be a number",
        ),
        (
            "<boinc><config><resend_lost_results>yes</resend_lost_results></config></boinc>",
            "<resend_lost_results> must be 0 or 1",
        ),
        ("<boinc><daemons/></boinc>", "no <config> section"),
        ("<boinc><config>", "not well-formed"),
    ],
)
def test_a_config_xml_it_cannot_use_is_refused_naming_the_tag(text, message):
    with pytest.raises(ConfigError, match=message):
        read_config_xml(text)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        read_config_xml(tmp_path / "absent.xml")


def test_the_project_config_comes_from_the_settings_file(settings, tmp_path):
    path = tmp_path / "config.xml"
    path.write_text("<boinc><config><delete_abandoned_outputs/></config></boinc>")
    settings.BOINC_CONFIG_XML = str(path)
    settings.BOINC_DAILY_RESULT_QUOTA = 12
    config = project_config()
    assert (config.delete_abandoned_outputs, config.daily_result_quota) == (True, 12)


@pytest.mark.parametrize(
    "script, args, names_itself",
    [
        ("server_differential.py", ["--cases", "1"], False),
        ("server_vs_boinc.py", ["--workunits", "10"], True),
    ],
)
def test_a_harness_without_boinc_says_how_to_build_it_and_exits_2(script, args, names_itself):
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2
    assert "./configure --disable-client --disable-manager --enable-server" in done.stderr
    if names_itself:
        assert f"bench/{script}" in done.stderr


def test_the_throughput_comparison_refuses_a_quorum_it_cannot_meet():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "server_vs_boinc.py"), "--hosts", "1"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "BOINC_SERVER": "/nonexistent"},
        timeout=60,
    )
    assert done.returncode == 2
    assert "--hosts 2 or more (a quorum of two needs two volunteers)" in done.stderr


# --- bench/server_differential.py: crashes, times and messages ------------------------------


@pytest.fixture
def harness():
    """bench/server_differential.py as a module. Importing it puts bench/ first on sys.path
    (it runs as a script beside boinc_server.py), where bench/world.py and its neighbours
    would hide the project's packages from later imports: the path is put back."""
    saved = list(sys.path)
    try:
        from bench import server_differential
    finally:
        sys.path[:] = saved
    return server_differential


def test_the_differential_counts_a_boinc_crash_apart_from_the_cases_compared(harness):
    # subprocess reports a program killed by SIGSEGV with exit status -11; a program that
    # exits with an error of its own is no crash, and its case is compared as any other
    assert harness.crash_signal(-11) == 11 and harness.signal_name(11) == "SIGSEGV"
    assert harness.crash_signal(0) is None and harness.crash_signal(1) is None
    crash = harness.outcome_of([("reply.jobs", [], [["r", 1]])], -11)
    assert (crash.kind, crash.signal, crash.diffs) == ("crash", 11, [])
    outcomes = [crash, harness.outcome_of([], 0), harness.outcome_of([("x", 1, 2)], 1)]
    assert [o.kind for o in outcomes] == ["crash", "agree", "differ"]
    # the crash counts neither for nor against boincweb: 1 of the 2 finished cases agrees
    assert harness.tally(outcomes) == dict(cases=3, crashes=1, finished=2, agree=1, share=50.0)


def test_the_differential_takes_times_within_its_tolerance_and_nothing_else(harness):
    def rows(transition_time, target_nresults=2, deadline=1_800_086_400):
        wu = dict.fromkeys(harness.WU_FIELDS, 0) | dict(
            transition_time=transition_time, target_nresults=target_nresults
        )
        return dict(
            workunit={"wu": wu},
            result={},
            host_app_version={},
            reply=dict(jobs=[["wu_0", deadline]], messages=[["low", "No tasks sent"]]),
        )

    now = 1_800_000_000
    boinc = rows(now + 2)  # BOINC's clock ran on for two seconds under faketime
    assert harness.differences("scheduler", boinc, rows(now), time_tolerance=2) == []
    assert harness.differences("scheduler", boinc, rows(now), time_tolerance=1) == [
        ("workunit[wu].transition_time", now + 2, now)
    ]
    # a count is no time: it must agree exactly
    assert harness.differences("scheduler", boinc, rows(now + 2, target_nresults=3)) == [
        ("workunit[wu].target_nresults", 2, 3)
    ]
    # the reply's deadlines within the tolerance, its jobs and messages exactly
    assert harness.differences("scheduler", rows(now, deadline=1_800_086_401), rows(now)) == []
    late = rows(now, deadline=1_800_086_403)
    assert harness.differences("scheduler", late, rows(now)) == [
        ("reply.jobs", [["wu_0", 1_800_086_403]], [["wu_0", 1_800_086_400]])
    ]
    other = rows(now)
    other["reply"]["messages"] = [["low", "This computer has finished a daily quota of 2 tasks"]]
    assert harness.differences("scheduler", rows(now), other)[0][0] == "reply.messages"


def test_the_differential_compares_message_texts_or_only_their_kinds(harness):
    from backend.daemons.sched_types import Message

    reply = (
        '<scheduler_reply><message priority="low">No tasks sent</message>'
        '<message priority="notice">Daily job limit (4) has been reached</message></scheduler_reply>'
    )
    ours = [Message("Daily job limit (4) has been reached", "notice"), Message("No tasks sent", "low")]
    assert (
        harness.parse_boinc_reply(reply)["messages"]
        == harness.reply_messages(ours)
        == [
            ["low", "No tasks sent"],
            ["notice", "Daily job limit (4) has been reached"],
        ]
    )
    assert harness.parse_boinc_reply(reply, texts=False)["messages"] == harness.reply_messages(ours, texts=False)
    assert harness.reply_messages(ours, texts=False) == ["low", "notice"]
