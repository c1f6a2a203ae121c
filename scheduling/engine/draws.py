"""The engine's random draws: Python's generator, or the C library's as BOINC's emulator draws.

Every random number the engine uses goes through one of two generators with the same four
methods:

- `PyRandom` (`--compat intended`): Python's Mersenne Twister, seeded with the run's seed.
- `GlibcRandom` (`--compat bce`): glibc's `rand()` after `srand(seed)`, as BOINC's emulator
  (client/sim.cpp) calls `srand(1)` before it reads its inputs, with BOINC's own
  transformations of it (lib/util.h `drand`, lib/util.cpp `rand_normal`, sim_util.cpp
  `exponential`). With `--seed 1` the engine then draws the numbers BCE draws; as long as the
  two make the same draws in the same order (docs/engine-fidelity.md, "One random stream, in
  BCE's order") they follow the same sample path: the same on and off periods, the same job
  sizes, the same back-offs.
"""

from __future__ import annotations

import math
import random

RAND_MAX = 2147483647
# lib/util.cpp rand_normal's constant for 2 pi, as BOINC writes it
BOINC_TWO_PI = 2 * 3.1415926


class PyRandom(random.Random):
    """Python's generator with the engine's draw methods (`--compat intended`)."""

    def exponential(self, mean: float) -> float:
        return self.expovariate(1.0 / mean)

    def normal(self, mean: float, std_dev: float) -> float:
        return self.gauss(mean, std_dev)


class GlibcRandom:
    """glibc's `random()` (the additive feedback generator behind `rand()`, TYPE_3: 31 words
    of state, taps 3 and 31), seeded as `srand(seed)` seeds it, and BOINC's draws from it.

    `srand` fills the state with the minimal standard generator (16807 x mod 2^31 - 1) from the
    seed, then discards 310 outputs; each output is the sum of two earlier words, mod 2^32,
    halved. The sequence for seed 1 starts 1804289383, 846930886, 1681692777.
    """

    __slots__ = ("_r", "_i", "_cached")

    def __init__(self, seed: int = 1):
        seed = int(seed) & 0xFFFFFFFF
        if seed == 0:
            seed = 1
        word = seed - (1 << 32) if seed >= 1 << 31 else seed  # the state holds 32-bit signed words
        r = [word]
        for _ in range(30):
            hi = abs(word) // 127773 * (1 if word >= 0 else -1)  # C's division truncates
            lo = word - hi * 127773
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += 2147483647
            r.append(word)
        r = [w & 0xFFFFFFFF for w in r]
        r += r[:3]  # words 31-33 repeat words 0-2
        self._r = r
        self._i = 0
        self._cached: float | None = None
        for _ in range(310):
            self._next()

    def _next(self) -> int:
        r = self._r
        word = (r[-31] + r[-3]) & 0xFFFFFFFF
        r.append(word)
        if len(r) > 4096:
            del r[:-34]
        return word >> 1

    def rand(self) -> int:
        """One `rand()`: an integer in [0, RAND_MAX]."""
        return self._next()

    def random(self) -> float:
        """lib/util.h `drand()`: rand() / RAND_MAX, so 1.0 is possible."""
        return self._next() / RAND_MAX

    def exponential(self, mean: float) -> float:
        """sim_util.cpp `exponential`: -mean x log(1 - drand())."""
        return -mean * math.log(1 - self.random())

    def normal(self, mean: float, std_dev: float) -> float:
        """NORMAL_DIST::sample with lib/util.cpp `rand_normal`: Box-Muller on two drand()s,
        the second value kept for the next call (whatever distribution that call is for)."""
        if self._cached is not None:
            z, self._cached = self._cached, None
            return mean + std_dev * z
        u1 = self.random()
        u2 = self.random()
        z = math.sqrt(-2 * math.log(u1))
        self._cached = z * math.sin(BOINC_TWO_PI * u2)
        return mean + std_dev * (z * math.cos(BOINC_TWO_PI * u2))


def make_rng(seed: int, bce: bool):
    """The generator of a run: BOINC's emulator's under `--compat bce`, Python's otherwise."""
    return GlibcRandom(seed) if bce else PyRandom(seed)
