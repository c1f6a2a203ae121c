from backend.models import INT_MAX
from backend.templatetags.boinc_time import unixtime


def test_unixtime_shows_utc_with_the_raw_seconds_in_the_tooltip():
    html = unixtime(1795310963)
    assert ">2026-11-22 01:29:23</time>" in html
    assert 'title="1795310963 (Unix seconds)"' in html


def test_unixtime_shows_zero_as_not_yet_and_int_max_as_never():
    assert unixtime(0) == "–"
    assert unixtime(INT_MAX) == "never"
    assert unixtime(None) == "–"
