"""GPU devices are handed out in run-list order (cpu_sched.assign_coprocs, BOINC's assign_coprocs):
when a job placed before a running one takes that job's device, the running job moves to the
device found for it, so that no device ever carries more than its whole.

The host (tests/scheduling/data/gpu_device_taken.json: 1 CPU, 2 NVIDIA GPUs, two projects with
a CPU and a whole-GPU version of one app) was found by test_invariants.py: at 58,260 s P1's job
in deadline danger comes first in the run list and takes device 0, where P0's job was still
running until 58,308 s."""

from collections import defaultdict
from pathlib import Path

import pytest

from scheduling.engine import run
from scheduling.engine.readers import read_json

HOST = Path(__file__).parent / "data" / "gpu_device_taken.json"


def _device_loads(result):
    """The largest sum of gpu_usage on one device at any instant, per device."""
    usage = {}
    for p in read_json(HOST.read_text()).projects:
        for app in p.apps:
            for v in app.versions:
                if v.gpu_type:
                    usage[p.name] = v.gpu_usage
    events = defaultdict(float)
    for sl in result.slices:
        if sl.resource != "cpu":
            events[(sl.instance, sl.start)] += usage[sl.project]
            events[(sl.instance, sl.end)] -= usage[sl.project]
    peak = defaultdict(float)
    load = defaultdict(float)
    for (instance, _t), change in sorted(events.items(), key=lambda kv: (kv[0][1], kv[1])):
        load[instance] += change
        peak[instance] = max(peak[instance], load[instance])
    return peak


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_running_job_whose_device_is_taken_moves_to_another(compat):
    result = run(read_json(HOST.read_text()), policy="boinc7", duration=86400, delta=60, seed=299, compat=compat)
    peak = _device_loads(result)
    assert peak and all(u <= 1.0 + 1e-9 for u in peak.values())
