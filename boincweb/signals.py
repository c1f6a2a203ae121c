"""Stopping a long-running command cleanly: SIGINT (Ctrl-C) and SIGTERM (what process managers
such as honcho send) are noted while it runs, so that it ends at a point of its own choosing,
and the handlers it found are back when it returns."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_requests() -> Iterator[list[int]]:
    """Within the block, the stop signals received are appended to the list it yields, and do
    nothing else; after it, their earlier handlers are restored."""
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
