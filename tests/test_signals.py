"""boincweb.signals: a long-running command notes SIGINT and SIGTERM and gives them back."""

import os
import signal

from boincweb.signals import STOP_SIGNALS, stop_requests


def test_stop_signals_are_noted_in_the_block_and_the_earlier_handlers_come_back():
    seen = []

    def earlier(signum, frame):
        seen.append(signum)

    before = {sig: signal.signal(sig, earlier) for sig in STOP_SIGNALS}
    try:
        with stop_requests() as stopping:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            assert stopping == [signal.SIGTERM, signal.SIGINT]
        assert seen == []  # the block's handler took them, not the earlier one
        assert all(signal.getsignal(sig) is earlier for sig in STOP_SIGNALS)
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM] and stopping == [signal.SIGTERM, signal.SIGINT]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_the_earlier_handlers_come_back_when_the_block_raises():
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        with stop_requests():
            raise RuntimeError("the command failed")
    except RuntimeError:
        pass
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == before
