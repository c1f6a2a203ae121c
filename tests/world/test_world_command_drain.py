"""``manage.py world`` on a population too small for its work: the drain stops at its cap with
workunits unfinished, and the command says that, with what to change, rather than only naming
the invariants that an unfinished run leaves false."""

import io

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_a_world_whose_hosts_cannot_finish_its_work_says_so_and_what_to_change():
    # two hosts and a drain of half a day: the generator's first file of 40 workunits (80
    # results of 12 CPU hours each) is far more than two hosts finish in it
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command(
            "world", "--hosts", "2", "--days", "0.1", "--set", "drain_days=0.5", "--set", "cushion=8", stdout=out
        )
    assert failed.value.returncode == 1
    message = str(failed.value)
    assert "did not finish the world's work in the drain's 0.5 simulated days" in message
    assert "more hosts, or more time with --set drain_days=N" in message
    unfinished, total = (int(word) for word in message.split(": ", 1)[1].split(" workunits")[0].split(" of "))
    assert 0 < unfinished <= total
    assert "invariant every_workunit_assimilated_or_errored: FAILED" in out.getvalue()


def test_a_world_that_drains_reports_no_such_thing():
    out = io.StringIO()
    call_command("world", "--hosts", "4", "--days", "0.1", "--set", "cushion=8", stdout=out)
    assert "FAILED" not in out.getvalue()
