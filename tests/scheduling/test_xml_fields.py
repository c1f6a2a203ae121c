"""The XML field readers that client_state.xml and scheduler requests are both read with."""

import xml.etree.ElementTree as ET

import pytest

from scheduling.engine import xml_fields
from scheduling.engine.xml_fields import FieldError


def element(body):
    return ET.fromstring(f"<e>{body}</e>")


def test_text_is_stripped_empty_or_none_when_the_child_is_absent():
    e = element("<a>  x y </a><b/><c></c>")
    assert [xml_fields.text(e, t) for t in ("a", "b", "c", "d")] == ["x y", "", "", None]
    assert xml_fields.text(None, "a") is None


@pytest.mark.parametrize(
    "body, value",
    [
        ("<n>1.5</n>", 1.5),
        ("<n> -2e3 </n>", -2000.0),
        ("<n/>", "default"),
        ("", "default"),
    ],
)
def test_number_reads_a_finite_float_or_gives_the_default(body, value):
    assert xml_fields.number(element(body), "n", "default") == value


@pytest.mark.parametrize(
    "body, problem",
    [
        ("<n>fast</n>", xml_fields.NOT_A_NUMBER),
        ("<n>1e999</n>", xml_fields.NOT_FINITE),
        ("<n>nan</n>", xml_fields.NOT_FINITE),
        ("<n>-inf</n>", xml_fields.NOT_FINITE),
    ],
)
def test_number_names_the_element_it_cannot_read(body, problem):
    with pytest.raises(FieldError) as info:
        xml_fields.number(element(body), "n")
    assert (info.value.tag, info.value.problem) == ("n", problem)
    assert str(info.value).startswith(f"<n> is {problem}: ")


@pytest.mark.parametrize(
    "body, value",
    [
        ("<i>42</i>", 42),
        ("<i>-7</i>", -7),
        (f"<i>{2**63 - 1}</i>", 2**63 - 1),
        ("<i> </i>", 0),
    ],
)
def test_integer_reads_a_64_bit_whole_number(body, value):
    assert xml_fields.integer(element(body), "i", 0) == value


@pytest.mark.parametrize(
    "body, problem",
    [
        ("<i>1.5</i>", xml_fields.NOT_WHOLE),
        ("<i>one</i>", xml_fields.NOT_WHOLE),
        (f"<i>{2**63}</i>", xml_fields.OUT_OF_RANGE),
        (f"<i>{-(2**63) - 1}</i>", xml_fields.OUT_OF_RANGE),
    ],
)
def test_integer_refuses_what_is_not_a_64_bit_whole_number(body, problem):
    with pytest.raises(FieldError) as info:
        xml_fields.integer(element(body), "i")
    assert info.value.problem == problem


@pytest.mark.parametrize(
    "body, value",
    [
        ("<f/>", True),
        ("<f />", True),
        ("<f>1</f>", True),
        ("<f>0</f>", False),
        ("", "default"),
    ],
)
def test_flag_reads_boincs_booleans(body, value):
    assert xml_fields.flag(element(body), "f", "default") == value


def test_flag_takes_the_words_that_mean_false():
    assert xml_fields.flag(element("<f>false</f>"), "f") is True
    assert xml_fields.flag(element("<f>false</f>"), "f", false=("0", "false")) is False
