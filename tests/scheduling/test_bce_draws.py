"""Under `--compat bce` the engine draws BOINC's emulator's random numbers in its order
(docs/engine-fidelity.md, "One random stream, in BCE's order"). The generator is checked
against the C library itself; the rest from the rules of sim.cpp and sim_util.cpp."""

import ctypes
import ctypes.util
import math

import pytest

from scheduling.engine import run
from scheduling.engine.draws import BOINC_TWO_PI, GlibcRandom, PyRandom, make_rng

from .helpers import HOUR, Availability, Host, cpu_app, project, scenario


def _libc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    libc = ctypes.CDLL(name)
    libc.rand.restype = ctypes.c_int
    libc.srand.argtypes = [ctypes.c_uint]
    libc.srand(1)
    # only glibc's rand() is the generator BOINC's emulator used (musl's differs)
    return libc if libc.rand() == 1804289383 else None


@pytest.mark.parametrize("seed", [1, 2, 0, 12345, 2**32 - 1])
def test_the_generator_is_the_c_librarys_rand(seed):
    libc = _libc()
    if libc is None:
        pytest.skip("the C library here is not glibc")
    libc.srand(seed)
    expected = [libc.rand() for _ in range(1000)]
    ours = GlibcRandom(seed)
    assert [ours.rand() for _ in range(1000)] == expected


def test_srand_1_starts_with_glibcs_well_known_values():
    g = GlibcRandom(1)
    assert [g.rand() for _ in range(3)] == [1804289383, 846930886, 1681692777]


def test_normal_draws_come_in_box_muller_pairs_with_boincs_constant():
    # rand_normal() draws two uniforms, returns z cos(2 pi u2) and keeps z sin(2 pi u2) for
    # the next call, whichever distribution that call is for
    g, h = GlibcRandom(7), GlibcRandom(7)
    u1, u2 = h.random(), h.random()
    z = math.sqrt(-2 * math.log(u1))
    assert g.normal(10.0, 2.0) == 10.0 + 2.0 * (z * math.cos(BOINC_TWO_PI * u2))
    assert g.normal(0.0, 1.0) == z * math.sin(BOINC_TWO_PI * u2)
    assert g.random() == h.random()  # the cached value used no draw


def test_intended_keeps_pythons_generator():
    rng = make_rng(3, bce=False)
    assert isinstance(rng, PyRandom)
    import random
    ref = random.Random(3)
    assert rng.exponential(3600.0) == ref.expovariate(1 / 3600.0)


def half_on_host():
    # on_frac 0.651, so with srand(1) the first drand() (0.8402) is above it: the host starts
    # off, and the second draw (0.3944) sets the off period: -(3600/0.651 - 3600) x
    # ln(1 - 0.3944) = 967.9 s (RANDOM_PROCESS::init, exponential())
    return scenario(project("P", apps=(cpu_app(hours=1.0),)),
                    host=Host(ncpus=1, on=Availability(0.651, 3600.0)))


def test_under_bce_the_host_changes_at_the_step_whose_interval_holds_the_periods_end():
    # RANDOM_PROCESS::sample subtracts the step before it looks, so the period ending at
    # 967.9 s flips the host on at the step of 960 s, and the first RPC is made then
    result = run(half_on_host(), compat="bce", seed=1, duration=2 * HOUR)
    off = [h for h in result.host_periods if h.state == "off"]
    assert off[0].start == 0.0 and off[0].end == 960.0
    assert result.rpcs[0].time == 960.0


def test_the_first_draws_also_start_processes_that_are_always_up():
    # RANDOM_PROCESS::init draws twice for each <time_stats> process, fraction 1 or not, in
    # the order on, connected, active, gpu_active: a host with only its GPU-active process
    # below 1 draws its state from the 7th drand() and its period from the 8th
    host = Host(ncpus=1, gpu_active=Availability(0.5, 3600.0))
    result = run(scenario(project("P", apps=(cpu_app(hours=1.0),)), host=host), compat="bce", seed=1,
                 duration=HOUR)
    g = GlibcRandom(1)
    draws = [g.random() for _ in range(8)]
    up = not draws[6] > 0.5
    assert up == (not any(h.state == "gpu_suspended" and h.start == 0.0 for h in result.host_periods))
