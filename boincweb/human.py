"""One way to show a number, a size, a duration and a simulated time, on every page and export.

Numbers keep their whole integer part and as many decimals as make ``digits`` significant
ones (credit 167999.985064 shows as 168,000; a share violation 0.36245 as 0.362), sizes are
decimal SI units (1 GB = 10^9 bytes) everywhere, durations name their unit, and a simulated
clock reads "day 1, 13:08" from its start. The raw value goes in a tooltip (the template
filters in boincweb/templatetags/human.py), since BOINC's own logs and tools speak in it.
"""

import math

SIZE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def number(value: float, digits: int = 3) -> str:
    """``value`` with its integer part whole and ``digits`` significant digits, at most.

    Thousands are separated by commas; a value that rounds to zero is "0", never "-0.000".
    """
    value = float(value)
    if not math.isfinite(value):
        return "∞" if value > 0 else "-∞" if value < 0 else "–"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))  # 0 for 1..9.99, -3 for 0.001..
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", "0"):
        return "0"
    return text


def data_size(count: float) -> str:
    """Bytes in decimal SI units: ``2_180_000_000`` -> "2.18 GB", ``512`` -> "512 B"."""
    count = float(count)
    unit = 0
    # 999,999 bytes round to 1,000 kB at three digits: that is 1 MB
    while abs(float(number(count).replace(",", ""))) >= 1000 and unit < len(SIZE_UNITS) - 1:
        count /= 1000
        unit += 1
    return f"{number(count)} {SIZE_UNITS[unit]}"


def duration(seconds: float) -> str:
    """A length of time in the units a person reads it in: "42 s", "12 min 05 s", "3 h 20 min",
    "2 d 04 h"."""
    seconds = float(seconds)
    if not math.isfinite(seconds):
        return "never"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{sign}{number(seconds)} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{sign}{whole // 60} min {whole % 60:02d} s"
    minutes = round(seconds / 60)
    if minutes < 24 * 60:
        return f"{sign}{minutes // 60} h {minutes % 60:02d} min"
    hours = round(seconds / 3600)
    return f"{sign}{hours // 24} d {hours % 24:02d} h"


def sim_time(seconds: float) -> str:
    """Seconds since a simulation's start as its clock: ``47_280`` -> "day 1, 13:08"."""
    seconds = max(0, int(seconds))
    day, rest = divmod(seconds, 86400)
    return f"day {day + 1}, {rest // 3600:02d}:{rest % 3600 // 60:02d}"
