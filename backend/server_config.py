"""The project's server options read from a BOINC config.xml (sched/sched_config.cpp).

``read_config_xml(path_or_text)`` returns a ``SchedulerConfig`` (backend.daemons.sched_types,
the one object holding every server option) with the options the file's ``<config>`` section
sets, under BOINC's names and units, and SchedulerConfig's defaults for the rest. Options
boincweb does not implement are ignored, as BOINC ignores tags it does not know; a value
that cannot be read, or is out of range, raises ``ConfigError`` naming the tag.

``project_config()`` is the running project's: ``settings.BOINC_CONFIG_XML`` when set, with
the settings BOINC_DAILY_RESULT_QUOTA and BOINC_RESEND_LOST_RESULTS applied over it when the
file does not set them.
"""

from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar
from xml.etree import ElementTree

from backend.daemons.sched_types import SchedulerConfig

# config.xml tags whose unit differs from the SchedulerConfig field's: tag -> (field, factor).
SCALED = {
    "report_grace_period_hours": ("report_grace_period", 3600),
    "infeasible_timeout_days": ("infeasible_timeout", 86400),
}


# parse_number's kinds
Number = TypeVar("Number", int, float)


class ConfigError(ValueError):
    """A config.xml boincweb cannot read; the message names the tag."""


def parse_bool(element: ElementTree.Element) -> bool:
    """BOINC's parse_bool: ``<tag/>`` is true, else the text as a whole number."""
    text = (element.text or "").strip()
    if not text:
        return True
    try:
        return int(text) != 0
    except ValueError:
        raise ConfigError(f"<{element.tag}> must be 0 or 1, not {text!r}") from None


def parse_number(element: ElementTree.Element, kind: type[Number]) -> Number:
    text = (element.text or "").strip()
    try:
        return kind(float(text)) if kind is int else kind(text)
    except ValueError:
        raise ConfigError(f"<{element.tag}> must be a number, not {text!r}") from None


def config_values(root: ElementTree.Element) -> dict[str, bool | int | float]:
    """SchedulerConfig keyword arguments from the ``<config>`` element ``root``."""
    types = {f.name: f.type for f in fields(SchedulerConfig)}
    values: dict[str, bool | int | float] = {}
    for element in root:
        tag = element.tag
        if tag in SCALED:
            name, factor = SCALED[tag]
            values[name] = int(parse_number(element, float) * factor)
        elif tag in types:
            kind = types[tag]
            if kind in (bool, "bool"):
                values[tag] = parse_bool(element)
            elif kind in (int, "int"):
                values[tag] = parse_number(element, int)
            else:
                values[tag] = parse_number(element, float)
    return values


def parse(source: str | Path) -> ElementTree.Element:
    """``<boinc><config>...</config></boinc>`` (or a bare ``<config>``) from text or a path."""
    return parse_document(source)[0]


def xml_root(source: str | Path, what: str, error_class: type[Exception]) -> ElementTree.Element:
    """The root element of a project's XML file, ``source`` being a path or the text itself;
    ``error_class`` (a message naming ``what``) when it cannot be read or parsed."""
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("<")):
        try:
            text = Path(source).read_text()
        except OSError as error:
            raise error_class(f"cannot read {source}: {error.strerror}") from None
    else:
        text = source
    try:
        return ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        raise error_class(f"{what} is not well-formed XML: {error}") from None


def parse_document(source: str | Path) -> tuple[ElementTree.Element, ElementTree.Element | None]:
    """``(the <config> element, the <daemons> element or None)`` of a config.xml."""
    root = xml_root(source, "config.xml", ConfigError)
    config = root if root.tag == "config" else root.find("config")
    if config is None:
        raise ConfigError("config.xml has no <config> section")
    return config, root.find("daemons")


# The validator's command-line credit options (sched/validator.cpp): flag -> takes a value.
VALIDATOR_OPTIONS = {
    "credit_from_wu": False,
    "credit_from_runtime": False,
    "no_credit": False,
    "max_granted_credit": True,
}


def validator_values(daemons: ElementTree.Element | None) -> dict[str, float | bool]:
    """SchedulerConfig keyword arguments from the credit options on the command line of the
    validator(s) config.xml's ``<daemons>`` runs (``<cmd>sample_bitwise_validator --app x
    --credit_from_wu</cmd>``), as BOINC's validator reads them (``-x`` or ``--x``)."""
    values: dict[str, float | bool] = {}
    if daemons is None:
        return values
    for cmd in daemons.iter("cmd"):
        words = (cmd.text or "").split()
        if not words or "validator" not in Path(words[0]).name:
            continue
        for i, word in enumerate(words):
            name = word.lstrip("-")
            if not word.startswith("-") or name not in VALIDATOR_OPTIONS:
                continue
            if not VALIDATOR_OPTIONS[name]:
                values[name] = True
                continue
            try:
                values[name] = float(words[i + 1])
            except (IndexError, ValueError):
                raise ConfigError(f"validator option --{name} needs a number") from None
    return values


def read_config_xml(source: str | Path, **overrides: Any) -> SchedulerConfig:
    """A SchedulerConfig from a BOINC config.xml (a path or its text); ``overrides`` are
    applied for options the file does not set."""
    config, daemons = parse_document(source)
    values: dict[str, Any] = config_values(config)
    values.pop("job_limits", None)  # config_aux.xml's, never config.xml's (read_job_limits)
    values.pop("locality_config", None)  # a caller's, never config.xml's
    values.update(validator_values(daemons))
    if isinstance(source, Path) and (source.parent / "plan_class_spec.xml").is_file():
        # the scheduler reads the project's plan classes from beside its config.xml
        values.setdefault("plan_class_spec", str(source.parent / "plan_class_spec.xml"))
    for name, value in overrides.items():
        values.setdefault(name, value)
    try:
        return SchedulerConfig(**values)
    except ValueError as error:
        raise ConfigError(f"config.xml: {error}") from None


def project_config() -> SchedulerConfig:
    """The running project's SchedulerConfig (see the module docstring)."""
    from django.conf import settings

    overrides = {
        "daily_result_quota": settings.BOINC_DAILY_RESULT_QUOTA,
        "resend_lost_results": settings.BOINC_RESEND_LOST_RESULTS,
    }
    path = getattr(settings, "BOINC_CONFIG_XML", "")
    if path:
        aux = Path(path).with_name("config_aux.xml")
        if aux.is_file():  # BOINC's job limits file, beside config.xml (sched_config.cpp)
            from backend.daemons.sched_limit import JobLimitsError, read_job_limits

            try:
                overrides["job_limits"] = read_job_limits(aux)
            except JobLimitsError as error:
                raise ConfigError(f"config_aux.xml: {error}") from None
        return read_config_xml(Path(path), **overrides)
    return SchedulerConfig(**overrides)
