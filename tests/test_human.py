"""One way to show numbers, sizes, durations and simulated times (boincweb/human.py)."""

import pytest
from django.template import Context, Template

from boincweb import human


@pytest.mark.parametrize(
    "value,shown",
    [
        (167999.985064, "168,000"),
        (0.36245, "0.362"),
        (0.3635, "0.363"),
        (12.0, "12"),
        (1234567, "1,234,567"),
        (0.000123456, "0.000123"),
        (-0.0000001, "-0.0000001"),
        (-0.00004, "-0.00004"),
        (0, "0"),
        (-0.0, "0"),
        (float("inf"), "∞"),
    ],
)
def test_a_number_keeps_its_integer_part_and_three_significant_digits(value, shown):
    assert human.number(value) == shown


def test_a_value_that_rounds_to_zero_is_never_shown_as_minus_zero():
    assert human.number(-0.0004, digits=1) == "-0.0004"
    assert human.number(-1e-12, digits=3) == "-0.000000000001"
    assert not human.number(-0.0).startswith("-")


@pytest.mark.parametrize(
    "count,shown",
    [
        (512, "512 B"),
        (1500, "1.5 kB"),
        (2_180_000_000, "2.18 GB"),
        (2_000_000_000, "2 GB"),
        (999_999, "1 MB"),
        (3.2e15, "3.2 PB"),
        (4e18, "4,000 PB"),
    ],
)
def test_sizes_are_decimal_si_units(count, shown):
    assert human.data_size(count) == shown


@pytest.mark.parametrize(
    "seconds,shown",
    [
        (42, "42 s"),
        (0.25, "0.25 s"),
        (725, "12 min 05 s"),
        (12000, "3 h 20 min"),
        (187200, "2 d 04 h"),
        (-90, "-1 min 30 s"),
    ],
)
def test_durations_name_their_unit(seconds, shown):
    assert human.duration(seconds) == shown


def test_a_simulated_clock_counts_days_from_one():
    assert human.sim_time(0) == "day 1, 00:00"
    assert human.sim_time(47_280) == "day 1, 13:08"
    assert human.sim_time(86_400 + 59) == "day 2, 00:00"


def test_the_filters_show_the_human_form_with_the_raw_value_on_hover():
    page = Template("{% load human %}{{ c|num }}|{{ b|bytes }}|{{ d|duration }}|{{ t|simtime:s }}|{{ x|num }}").render(
        Context({"c": 167999.985064, "b": 2_180_000_000, "d": 725, "t": 1_000_047_280, "s": 1_000_000_000, "x": "n/a"})
    )
    assert page == (
        '<span title="167999.985064">168,000</span>|'
        '<span title="2,180,000,000 bytes">2.18 GB</span>|'
        '<span title="725 s">12 min 05 s</span>|'
        '<span title="47,280 s">day 1, 13:08</span>|n/a'
    )
