"""Parsing of durations as the command line takes them (DESIGN.md, "Command-line contracts")."""

from __future__ import annotations

import math
import re

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([smhd]?)\s*$")


def parse_duration(text: str) -> float:
    """Seconds from `36h`, `10d`, `90m`, `45s` or a plain number of seconds; ValueError otherwise."""
    m = _DURATION_RE.match(str(text))
    if not m:
        raise ValueError(f"invalid duration {text!r} (use seconds or a number with s, m, h or d, e.g. 10d)")
    value = float(m.group(1)) * _UNITS[m.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return value
