"""Editing a world host's preferences as its volunteer does, through the prefs form."""

import time

from backend.forms import HostPrefsForm
from backend.models import Host


def edit_prefs(host_id, owner, **values):
    """Save ``values`` over the defaults below on Host ``host_id`` through HostPrefsForm, stamped
    now, as the host's page saves them for ``owner``."""
    data = {
        "work_buf_min_days": 0.25,
        "work_buf_additional_days": 0.5,
        "max_ncpus_pct": 100,
        "cpu_usage_limit": 100,
        "cpu_scheduling_period_minutes": 60,
        **values,
    }
    form = HostPrefsForm(data, instance=Host.objects.get(pk=host_id))
    assert form.is_valid(), form.errors
    form.save_changes(owner, int(time.time()))
