"""`wrr`: weighted round-robin by project priority with no EDF pass (the emulator's
--cpu_sched_rr_only, reference/client.md §1); a teaching baseline that misses deadlines
`boinc7` meets."""

from __future__ import annotations

from .boinc7 import Boinc7


class Wrr(Boinc7):
    name = "wrr"
    use_edf = False
