"""The bounds forms check numbers against where no engine limit applies, in one place.

The scheduling lab's fields take the engine's limits (scheduling/engine/scenario.py, "Limits");
the fields here are the ones the lab, the host preferences and the worlds share:

- a seed, stored in an integer column (World.seed): 0 to ``INT_MAX``, the largest value
  PostgreSQL's ``integer`` holds, so that a longer number is a form error, not a database one;
- a work buffer in days (BOINC's ``work_buf_min_days`` and ``work_buf_additional_days``): 0, or
  at least ``MIN_BUFFER_DAYS`` (one second: a client fetches work for at least 180 s whatever
  smaller buffer it is given, reference/client.md §2), and at most the caller's limit. It is shown to
  ``SIGNIFICANT_DIGITS`` digits, so that 20 seconds reads 0.000231481 rather than
  0.0002314814814814815, and the shown value sent back keeps the exact one
  (``KeepsShownNumbers``), so that a form saved unchanged changes nothing.
"""

from typing import Any

from django import forms

INT_MAX = 2**31 - 1
DAY = 86400.0
# The largest buffer BOINC's preference pages take (a host's preferences), in days.
PREFS_MAX_BUFFER_DAYS = 10.0
MIN_BUFFER_DAYS = 1 / DAY
SIGNIFICANT_DIGITS = 6


def seed_field(**kwargs: Any) -> forms.IntegerField:
    """A random seed a world or a run is stored with."""
    return forms.IntegerField(
        initial=1,
        min_value=0,
        max_value=INT_MAX,
        help_text=f"Any whole number from 0 to {INT_MAX:,}; the same seed, the same run.",
        **kwargs,
    )


def shown(value: float) -> float:
    """``value`` as the form shows it."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


class KeepsShownNumbers:
    """For a form with BufferDaysFields: a number sent back as the form showed it keeps its
    exact initial value, so that saving a form unchanged changes nothing."""

    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        data = super().clean()  # type: ignore[misc]
        for name, field in self.fields.items():
            if isinstance(field, BufferDaysField) and isinstance(data.get(name), float):
                old = self.get_initial_for_field(field, name)  # type: ignore[attr-defined]
                if isinstance(old, float) and data[name] == shown(old):
                    data[name] = old
        return data


class BufferDaysField(forms.FloatField):
    """A work buffer in days: 0, or from one second to ``high`` days."""

    def __init__(self, *, high: float, **kwargs: Any) -> None:
        # the range as Django words it, unless the caller words it with validators of its own
        if "validators" not in kwargs:
            kwargs.update(min_value=0.0, max_value=high)
        super().__init__(**kwargs)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is not None and 0 < value < MIN_BUFFER_DAYS:
            raise forms.ValidationError(
                f"0, or at least one second ({MIN_BUFFER_DAYS:.3g} days).", code="below_one_second"
            )

    def prepare_value(self, value: Any) -> Any:
        return shown(value) if isinstance(value, float) else value
