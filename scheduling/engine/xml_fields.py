"""Reading a child element of BOINC's XML as text, a number, a whole number or a flag.

Both readers of BOINC's XML use these: the scenario reader (readers.py: client_state.xml and
its prefs files) and the scheduler-request reader (protocol/xml_request.py). A value that is
not what its element should hold raises `FieldError`, naming the element, the text and what
is wrong with it; each reader turns that into its own error and words. No Django here: the
engine must stay free of it, and protocol may import from the engine but not the reverse.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:  # the engine reads XML only for client_state.xml: ElementTree is imported there
    from xml.etree.ElementTree import Element

# FieldError.problem: what is wrong with the text
NOT_A_NUMBER = "not a number"
NOT_FINITE = "not finite"
NOT_WHOLE = "not a whole number"
OUT_OF_RANGE = "out of range"

# a whole number must fit a signed 64-bit column, as BOINC's ids and counts do
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1


class FieldError(ValueError):
    """The text of `<tag>` is not what the element holds; `problem` is one of the constants above."""

    def __init__(self, tag: str, text: str, problem: str):
        super().__init__(f"<{tag}> is {problem}: {text[:40]!r}")
        self.tag, self.text, self.problem = tag, text, problem


def text(element: Element | None, tag: str) -> str | None:
    """The stripped text of the child `<tag>` ("" when it is empty); None without that child."""
    if element is None:
        return None
    child = element.find(tag)
    if child is None:
        return None
    return (child.text or "").strip()


def number(element: Element | None, tag: str, default=None):
    """The child `<tag>` as a finite float; `default` when it is absent or empty."""
    value = text(element, tag)
    if not value:
        return default
    try:
        parsed = float(value)
    except ValueError:
        raise FieldError(tag, value, NOT_A_NUMBER) from None
    if not math.isfinite(parsed):
        raise FieldError(tag, value, NOT_FINITE)
    return parsed


def integer(element: Element | None, tag: str, default=None):
    """The child `<tag>` as a whole number within 64 bits; `default` when absent or empty."""
    value = text(element, tag)
    if not value:
        return default
    try:
        parsed = int(value)
    except ValueError:
        raise FieldError(tag, value, NOT_WHOLE) from None
    if not MIN_INTEGER <= parsed <= MAX_INTEGER:
        raise FieldError(tag, value, OUT_OF_RANGE)
    return parsed


def flag(element: Element | None, tag: str, default: bool = False, *, false=("0",)) -> bool:
    """BOINC's booleans: `<tag/>`, `<tag />` or `<tag>1</tag>` is true, a text in `false`
    false; `default` without the child."""
    value = text(element, tag)
    if value is None:
        return default
    return value not in false
