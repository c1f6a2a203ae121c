"""The `simulate` and `rrsim` commands: DESIGN.md's JSON contracts, results.dat, errors."""

import io
import json
import pathlib
import re
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"


def simulate(*args):
    out = io.StringIO()
    call_command("simulate", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("path", ["standard.json", "scenario1.txt", "client_state", "seed001_example1.txt"])
def test_simulate_json_has_the_contract_keys_for_every_scenario_kind(path):
    data = json.loads(simulate(SCENARIOS / path, "--duration", "36h", "--json"))
    assert set(data["figures"]) == {"wasted_fraction", "idle_fraction", "share_violation", "monotony", "rpcs_per_job"}
    assert all(isinstance(v, float) for v in data["figures"].values())
    for p in data["projects"]:
        assert set(p) >= {
            "name",
            "resource_share",
            "flops_used",
            "flops_wasted",
            "deadlines_met",
            "deadlines_missed",
            "jobs_completed",
        }
    assert data["duration"] == 36 * 3600
    assert data["policy"] == "boinc7" and data["seed"] == 1
    assert isinstance(data["cpu_seconds"], float)


@pytest.mark.parametrize("policy", ["boinc7", "boinc5", "wrr", "fifo"])
@pytest.mark.parametrize("compat", ["intended", "bce"])
def test_simulate_runs_every_policy_in_both_compat_modes(policy, compat):
    data = json.loads(
        simulate(SCENARIOS / "standard.json", "--policy", policy, "--compat", compat, "--duration", "1d", "--json")
    )
    assert data["policy"] == policy and data["compat"] == compat
    assert sum(p["flops_used"] for p in data["projects"]) > 0


def test_simulate_out_writes_boincs_results_dat_line(tmp_path):
    simulate(SCENARIOS / "standard.json", "--duration", "1d", "--out", tmp_path)
    line = (tmp_path / "results.dat").read_text()
    assert re.fullmatch(r"wf \d+\.\d{6} if \d+\.\d{6} sv \d+\.\d{6} m \d+\.\d{6} r \d+\.\d{6}\n", line)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["slices"] and run["decisions"] and run["rec"]


def test_existing_jobs_only_sends_nothing_so_rpcs_per_job_is_zero():
    data = json.loads(simulate(SCENARIOS / "client_state", "--duration", "1d", "--existing-jobs-only", "--json"))
    assert data["figures"]["rpcs_per_job"] == 0.0
    assert all(p["jobs_received"] == 0 for p in data["projects"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.json"], "no such file"),
        ([SCENARIOS / "standard.json", "--duration", "ten days"], "invalid duration"),
        ([SCENARIOS / "standard.json", "--delta", "0"], "--delta must be positive"),
    ],
)
def test_simulate_rejects_bad_input_with_exit_code_2(args, message):
    with pytest.raises(CommandError, match=message) as info:
        simulate(*args)
    assert info.value.returncode == 2


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "scenarios/standard.json", "--policy", "nonsense"],
        ["simulate", "scenarios/standard.json", "--duration", "-3d"],
        ["simulate", "bad.txt"],
        ["rrsim", "scenarios/standard.json", "--at", "-5"],
    ],
)
def test_the_command_line_prints_one_line_and_exits_2_without_a_traceback(args, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("P1(1, 2, .5)\nP2(1, x, .5)\n")
    args = [str(bad) if a == "bad.txt" else a for a in args]
    proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    if "bad.txt" in " ".join(args):
        assert "line 2" in proc.stderr
