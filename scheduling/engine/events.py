"""The kinds of the emulator's events, in the order they are handled at one instant (the
priority in its heap of `(time, priority, counter, event)`; emulator.py)."""

N_KINDS = 9
EV_HOST, EV_DONE, EV_SLICE, EV_FETCH, EV_REPORT, EV_WAKE, EV_SAMPLE, EV_END, EV_ACCT = range(N_KINDS)
