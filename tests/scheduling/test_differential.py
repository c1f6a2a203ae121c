"""bench/differential.py: the random hosts it writes are read back as the same host, and it
refuses to run without BOINC's emulator."""

import importlib.util
import os
import random

import pytest

from scheduling.engine import read_client_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def differential():
    spec = importlib.util.spec_from_file_location("differential", os.path.join(ROOT, "bench", "differential.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_random_host_reads_back_as_the_host_it_describes(differential, tmp_path):
    rng = random.Random(7)
    for i in range(1, 31):
        host = differential.random_host(rng, i)
        case = tmp_path / f"case{i}"
        case.mkdir()
        (case / "client_state.xml").write_text(differential.client_state_xml(host))
        (case / "global_prefs.xml").write_text(differential.global_prefs_xml(host))
        scenario = read_client_state(str(case))
        assert scenario.host.ncpus == host["ncpus"]
        assert {(g.name, g.count) for g in scenario.host.gpus} == {(g["type"], g["count"]) for g in host["gpus"]}
        assert [p.name for p in scenario.projects] == [p["name"] for p in host["projects"]]
        assert scenario.prefs.work_buf_min_days == host["prefs"]["work_buf_min_days"]
        for p, spec in zip(scenario.projects, host["projects"]):
            assert p.resource_share == spec["share"]
            assert len(p.jobs) == len(spec["jobs"])
            for app, aspec in zip(p.apps, spec["apps"]):
                v = app.versions[0]
                assert v.avg_ncpus == pytest.approx(aspec["version"]["avg_ncpus"])
                assert v.gpu_type == aspec["version"].get("gpu")
                assert app.max_concurrent == aspec["max_concurrent"]
                assert app.latency_bound == aspec["latency_bound"]


def test_the_host_space_reaches_its_corners(differential):
    rng = random.Random(1)
    hosts = [differential.random_host(rng, i) for i in range(200)]
    assert min(h["ncpus"] for h in hosts) == 1 and max(h["ncpus"] for h in hosts) == 32
    assert {len(h["gpus"]) for h in hosts} == {0, 1, 2}
    assert max(len(h["projects"]) for h in hosts) == 20
    kinds = {a["kind"] for h in hosts for p in h["projects"] for a in p["apps"]}
    assert kinds == {"cpu", "gpu", "mt"}
    assert any(p["share"] == 0 for h in hosts for p in h["projects"])
    assert any(p["jobs"] for h in hosts for p in h["projects"])
    assert any(a["max_concurrent"] for h in hosts for p in h["projects"] for a in p["apps"])


def test_it_exits_2_and_says_how_to_build_the_emulator_without_bce_sim(differential, monkeypatch, capsys):
    monkeypatch.delenv("BCE_SIM", raising=False)
    assert differential.main(["--cases", "1"]) == 2
    assert "makefile_sim" in capsys.readouterr().err


def test_results_dat_is_read_figure_by_figure(differential):
    figures = differential.parse_results_dat("wf 0.010000 if 0.250000 sv 0.500000 m 0.125000 r 0.990000\n")
    assert figures == {
        "wasted_fraction": 0.01,
        "idle_fraction": 0.25,
        "share_violation": 0.5,
        "monotony": 0.125,
        "rpcs_per_job": 0.99,
    }
    assert differential.within("rpcs_per_job", 0.56, 0.99) is False
    assert differential.within("idle_fraction", 0.05, 0.03) is True


BCE_LOG = """\
00:00:00 [---] cc_config.xml not found - using defaults
01:19:00 [proj00] doing RPC to get work
01:19:00 [proj00] RPC: [work_fetch] request: CPU (856396.80 sec, 8.00 inst) NVIDIA GPU (321148.80 sec, 3.00 inst)
01:19:00 [---] Got 18 tasks
03:12:00 [proj01] RPC skipped: project down
1 day 03:19:00 [proj00] RPC: [work_fetch] request: CPU (841282.79 sec, 7.16 inst) NVIDIA GPU (0.00 sec, 0.00 inst)
1 day 03:19:00 [---] Got 11 tasks
"""


def _run_json(path, rpcs):
    import json

    path.mkdir()
    (path / "run.json").write_text(
        json.dumps(
            {
                "rpcs": [
                    {"time": t, "project": p, "ok": n != "down", "jobs_received": {} if n == "down" else {"NVIDIA": n}}
                    for t, p, n in rpcs
                ]
            }
        )
    )


def test_the_rpc_traces_of_bces_log_and_the_engines_run_are_compared_in_order(differential, tmp_path):
    # log.txt counts from BCE's START_TIME (an hour) and prints days past the first
    (tmp_path / "bce").mkdir()
    (tmp_path / "bce" / "log.txt").write_text(BCE_LOG)
    assert differential.bce_rpcs(str(tmp_path / "bce" / "log.txt")) == [
        (1140.0, "proj00", 18),
        (7920.0, "proj01", "down"),
        (86400.0 + 8340.0, "proj00", 11),
    ]
    _run_json(tmp_path / "engine", [(1140.0, "proj00", 18), (7920.0, "proj01", "down"), (94740.0, "proj00", 11)])
    assert differential.same_until(str(tmp_path)) is None
    (tmp_path / "engine" / "run.json").unlink()
    (tmp_path / "engine").rmdir()
    _run_json(tmp_path / "engine", [(1140.0, "proj00", 18), (7920.0, "proj01", "down"), (94740.0, "proj00", 12)])
    assert differential.same_until(str(tmp_path)) == 94740.0
    (tmp_path / "engine" / "run.json").unlink()
    (tmp_path / "engine").rmdir()
    _run_json(tmp_path / "engine", [(1140.0, "proj00", 18)])
    assert differential.same_until(str(tmp_path)) == 7920.0
