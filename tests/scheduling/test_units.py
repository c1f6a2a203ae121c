"""The one duration grammar: the engine's parse_duration, which simulate --duration and the lab's
run and compare forms (DurationField) both read."""

import pytest
from django import forms

from scheduling.engine.scenario import MAX_DURATION
from scheduling.engine.units import parse_duration
from scheduling.forms import DurationField


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("45", 45.0),
        ("45s", 45.0),
        ("90m", 5400.0),
        ("36h", 129600.0),
        ("10d", 864000.0),
        ("1.5h", 5400.0),
        (".5d", 43200.0),
        ("1e3", 1000.0),
        ("2.5e1m", 1500.0),
        ("1E2s", 100.0),
        ("2 d", 172800.0),
        ("  36h\n", 129600.0),
    ],
)
def test_it_reads_seconds_or_a_number_with_a_unit(text, seconds):
    assert parse_duration(text) == seconds
    assert DurationField().clean(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "  ", "d", "ten days", "10w", "10D", "5.", "1.2.3", "10dd", "+5", "inf", "nan", "1,5h", "h10"]
)
def test_it_refuses_what_is_not_a_duration(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
    with pytest.raises(forms.ValidationError, match="Give seconds or a number with a unit"):
        DurationField().clean(text)


@pytest.mark.parametrize("text", ["0", "0d", "-5", "1e999", "0.0h"])
def test_it_refuses_a_duration_that_is_not_positive_and_finite(text):
    with pytest.raises(ValueError):
        parse_duration(text)
    with pytest.raises(forms.ValidationError, match="more than 0"):
        DurationField().clean(text)


def test_the_form_caps_it_at_the_engines_longest_run():
    assert DurationField().clean(f"{MAX_DURATION:g}") == MAX_DURATION
    with pytest.raises(forms.ValidationError, match="At most"):
        DurationField().clean(f"{MAX_DURATION * 2:g}")
