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
    assert figures == {"wasted_fraction": 0.01, "idle_fraction": 0.25, "share_violation": 0.5,
                       "monotony": 0.125, "rpcs_per_job": 0.99}
    assert differential.within("rpcs_per_job", 0.56, 0.99) is False
    assert differential.within("idle_fraction", 0.05, 0.03) is True
