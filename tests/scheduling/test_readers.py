"""Scenario readers: P(C, D, R), client_state.xml, JSON; malformed input names its place."""

import json
import os
import textwrap

import pytest

from scheduling.engine import ScenarioError, load_scenario, read_client_state, read_json, read_pcdr, scenario_to_dict

SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios")


def test_it_reads_the_seeds_first_pcdr_example_on_one_line():
    s = read_pcdr("P1(1000, 2000, .5) P2(1, 10, .5) NCPUS=4")
    assert s.host.ncpus == 4
    assert [p.name for p in s.projects] == ["P1", "P2"]
    p1 = s.projects[0]
    assert p1.resource_share == 0.5
    assert p1.apps[0].fpops_est == 1000 * 3600 * 1e9
    assert p1.apps[0].latency_bound == 2000 * 3600


def test_it_reads_scenario_1_with_its_parameters_in_hours():
    s = read_pcdr(
        textwrap.dedent("""\
        P1(0.1, 1, .5)
        P2(1, 24, .25)
        P3(1, 24, .25)
        NCPUS = 2
        leave_in_memory = false
        cpu_scheduling_period = 1
        min_queue = 10
    """)
    )
    assert s.host.ncpus == 2
    assert s.prefs.leave_apps_in_memory is False
    assert s.prefs.cpu_scheduling_period_minutes == 60
    assert s.prefs.work_buf_min_days * 24 == pytest.approx(10)
    assert [p.resource_share for p in s.projects] == [0.5, 0.25, 0.25]


@pytest.mark.parametrize(
    "text, where",
    [
        ("P1(1, 2)", "line 1"),
        ("P1(1, 2, .5)\nP2(x, 2, .5)", "line 2"),
        ("P1(1, 2, .5)\n\nNCPUS = two", "line 3"),
        ("P1(1, 2, .5)\nbogus", "line 2"),
        ("P1(1, 2, .5)\ncolour = 3", "line 2"),
        ("P1(0, 2, .5)", "line 1"),
        ("NCPUS = 2", "line 1"),
    ],
)
def test_it_rejects_malformed_pcdr_naming_the_line(text, where):
    with pytest.raises(ScenarioError, match=where):
        read_pcdr(text)


def test_it_reads_a_client_state_directory_with_prefs_and_cc_config():
    s = load_scenario(os.path.join(SCENARIOS, "client_state"))
    assert s.source == "client_state"
    assert s.host.ncpus == 4
    assert s.host.gpus[0].name == "NVIDIA"
    assert s.host.on.frac == pytest.approx(0.8)
    assert s.prefs.work_buf_min_days == pytest.approx(0.2)
    assert s.prefs.rec_half_life_days == pytest.approx(5)
    names = [p.name for p in s.projects]
    assert names == ["cpu_project", "gpu_project"]
    gpu = s.projects[1]
    assert any(v.gpu_type == "NVIDIA" for a in gpu.apps for v in a.versions)
    cpu = s.projects[0]
    assert cpu.jobs and cpu.jobs[0].deadline == pytest.approx(86400 * 3)


def test_it_rejects_malformed_xml(tmp_path):
    (tmp_path / "client_state.xml").write_text("<client_state><host_info>")
    with pytest.raises(ScenarioError, match="malformed XML"):
        read_client_state(str(tmp_path))


HOST = (
    "<host_info><p_ncpus>1</p_ncpus><p_fpops>1e9</p_fpops></host_info><project><project_name>P</project_name></project>"
)


@pytest.mark.parametrize(
    "body, where",
    [
        (
            "<host_info><p_ncpus>4</p_ncpus><p_fpops>fast</p_fpops></host_info>",
            r"<host_info>: <p_fpops> is not a number",
        ),
        (
            HOST + "<app><name>a</name></app><app_version><app_name>a</app_name><avg_ncpus>1</avg_ncpus></app_version>",
            r"<app_version> #1 \(a\): missing <flops>",
        ),
        (
            HOST + "<app><name>a</name><fpops><mean>1e12</mean><stdev>1</stdev></fpops></app>"
            "<app_version><app_name>a</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>",
            "the tag is <std_dev>",
        ),
        (
            HOST + "<workunit><name>w</name><app_name>a</app_name><rsc_fpops_est>1e12</rsc_fpops_est></workunit>"
            "<result><name>r</name><wu_name>x</wu_name><report_deadline>10</report_deadline></result>",
            r"<result> #1 \(r\): <wu_name> 'x' names no <workunit>",
        ),
        ("<app><name>a</name></app>", "<host_info>"),
    ],
)
def test_it_rejects_malformed_client_state_naming_the_element(tmp_path, body, where):
    (tmp_path / "client_state.xml").write_text(f"<client_state>{body}</client_state>")
    with pytest.raises(ScenarioError, match=where):
        read_client_state(str(tmp_path))


def test_it_round_trips_a_json_scenario():
    s = load_scenario(os.path.join(SCENARIOS, "standard.json"))
    again = read_json(json.dumps(scenario_to_dict(s)))
    assert again.projects == s.projects
    assert again.host == s.host
    assert again.prefs == s.prefs


@pytest.mark.parametrize(
    "doc, where",
    [
        ('{"host": {"ncpus": 1}, "projects": [{"name": "P", "colour": 1}]}', "projects\\[0\\]: unknown key 'colour'"),
        ('{"host": {"ncpus": "many"}, "projects": []}', "host.ncpus"),
        (
            '{"host": {}, "projects": [{"name": "P", "apps": [{"name": "a", "versions": []}]}]}',
            "projects\\[0\\].apps\\[0\\]",
        ),
        ('{"host": {},\n "projects": [}', "line 2"),
        (
            '{"host": {}, "projects": [{"name": "P", "jobs": '
            '[{"name": "j", "app": "nope", "fpops": 1, "fpops_est": 1, "deadline": 5}]}]}',
            "unknown app",
        ),
    ],
)
def test_it_rejects_malformed_json_naming_the_key_or_line(doc, where):
    with pytest.raises(ScenarioError, match=where):
        read_json(doc)


def test_it_rejects_an_unknown_file_type(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text("x")
    with pytest.raises(ScenarioError, match="unknown scenario type"):
        load_scenario(str(path))


def test_no_rsc_apps_of_a_project_are_read_as_processor_type_names(tmp_path):
    (tmp_path / "client_state.xml").write_text(
        "<client_state><host_info><p_ncpus>2</p_ncpus><p_fpops>1e9</p_fpops>"
        "<coprocs><coproc_cuda><count>1</count><peak_flops>1e11</peak_flops></coproc_cuda></coprocs></host_info>"
        "<project><master_url>http://a/</master_url><project_name>A</project_name>"
        "<no_rsc_apps>NVIDIA</no_rsc_apps><no_rsc_apps>CPU</no_rsc_apps></project>"
        "<app><name>x</name></app><app_version><app_name>x</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>"
        "</client_state>"
    )
    assert read_client_state(str(tmp_path)).projects[0].no_rsc_apps == ("NVIDIA", "cpu")


def test_a_client_states_no_rsc_apps_go_through_json_and_back(tmp_path):
    test_no_rsc_apps_of_a_project_are_read_as_processor_type_names(tmp_path)
    read = read_client_state(str(tmp_path))
    again = read_json(json.dumps(scenario_to_dict(read)))
    assert again.projects == read.projects and again.projects[0].no_rsc_apps == ("NVIDIA", "cpu")


@pytest.mark.parametrize(
    "names, where",
    [('"NVIDIA"', "no_rsc_apps: unexpected value"), ('["NVIDIA", 3]', r"no_rsc_apps\[1\]: unexpected value")],
)
def test_no_rsc_apps_in_json_must_be_a_list_of_names(names, where):
    with pytest.raises(ScenarioError, match=where):
        read_json('{"host": {}, "projects": [{"name": "P", "no_rsc_apps": %s}]}' % names)
