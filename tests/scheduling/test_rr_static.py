"""What every round-robin simulation of a run shares (rr_sim._Static): kept on the emulator,
pickled with it, and made again from an emulator pickled before it kept its present fields."""

import pickle

from scheduling.engine.rr_sim import _Static, _static, rr_simulate

from .helpers import Prefs, boinc7_emulator, job, project, scenario


def test_the_static_part_is_made_once_and_survives_a_pickle():
    s = scenario(project("A", [job("a1", hours=1), job("a2", hours=2)]), ncpus=2, prefs=Prefs(1, 1))
    em = boinc7_emulator(s, "bce")
    static = _static(em)
    assert _static(em) is static
    assert (static.nr, static.ninstances, static.bce) == (1, [em.resources[0].ninstances], True)
    again = pickle.loads(pickle.dumps(em))
    kept = _static(again)
    assert (kept.nr, kept.ninstances, kept.bce, kept.caps) == (static.nr, static.ninstances, True, static.caps)
    assert rr_simulate(again, 0.0).rsc[0].shortfall == rr_simulate(em, 0.0).rsc[0].shortfall


def test_a_static_part_pickled_before_it_kept_the_resources_is_made_again():
    s = scenario(project("A", [job("a1", hours=1)]), ncpus=2, prefs=Prefs(1, 1))
    em = boinc7_emulator(s, "bce")
    static = _static(em)
    # the state a _Static without nr, ninstances and bce pickled: (None, its slots)
    old = _Static.__new__(_Static)
    before = ("caps", "mc_cap", "any_mc", "fair", "gpus_first")
    old.__setstate__((None, {name: getattr(static, name) for name in before}))
    em._rr_static = old
    made = _static(em)
    assert made is not old and made is em._rr_static
    assert (made.nr, made.ninstances, made.bce) == (static.nr, static.ninstances, static.bce)
