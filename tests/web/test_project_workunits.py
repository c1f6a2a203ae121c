import csv
import io
import re

import pytest

from backend.forms import SORTS
from backend.keyset import BadCursor, decode_cursor, encode_cursor
from backend.models import AssimilateState, ErrorMask, Project, Workunit
from tests.factories import NOW, AppFactory, ProjectFactory, ResultFactory, UserFactory
from tests.pages import parse, texts
from tests.web.project_data import app, make_workunits  # noqa: F401

pytestmark = pytest.mark.django_db


def names(page):
    """The names the page links to workunit pages, in page order."""
    return texts(parse(page).find_all("a", href=re.compile(r"^/project/workunits/\d")))


@pytest.fixture
def many(app):
    other = AppFactory(name="seti")
    make_workunits(app, 60)
    make_workunits(other, 5, start=100, error_mask=ErrorMask.CANCELLED | ErrorMask.COULDNT_SEND_RESULT)
    make_workunits(
        app, 3, start=200, assimilate_state=AssimilateState.READY, error_mask=ErrorMask.TOO_MANY_TOTAL_RESULTS
    )
    return other


def test_cursor_round_trips_and_rejects_garbage():
    assert decode_cursor(encode_cursor("wu_00001", 7)) == ("wu_00001", 7)
    for bad in [
        "",
        "!!!",
        encode_cursor("x", "7")[:-3],
        "W10",
        encode_cursor("a\x00", 7),
        encode_cursor(1, 2**70),
        encode_cursor(1, -4),
    ]:
        with pytest.raises(BadCursor):
            decode_cursor(bad)


def test_list_pages_newest_first_by_keyset(client, many):
    first = client.get("/project/workunits/")
    assert first.status_code == 200
    assert names(first)[0] == "wu_00202" and len(names(first)) == 50
    nxt = first.context["next_url"]
    second = client.get("/project/workunits/" + nxt)
    assert len(names(second)) == 18 and not second.context["next_url"]
    back = client.get("/project/workunits/" + second.context["prev_url"])
    assert names(back) == names(first)
    assert not back.context["prev_url"]


def test_list_sorts_by_name_both_ways_across_pages(client, many):
    seen = []
    url = "/project/workunits/?sort=-name"
    while url:
        page = client.get(url)
        seen += names(page)
        url = "/project/workunits/" + page.context["next_url"] if page.context["next_url"] else ""
    assert seen == sorted(Workunit.objects.values_list("name", flat=True), reverse=True)


def link(page, rel):
    """The pager's ``rel`` link of a page or fragment."""
    return "/project/workunits/" + parse(page).find(attrs={"rel": rel})["href"]


def walk(client, url, key="next_url"):
    """The names on every page from ``url`` on, following ``key`` links, and the pages."""
    seen, pages = [], []
    while url:
        page = client.get(url)
        pages.append(page)
        seen += names(page)
        url = "/project/workunits/" + page.context[key] if page.context[key] else ""
    return seen, pages


@pytest.fixture
def tied(app):
    """130 workunits whose transition_time ties in runs across page boundaries, a third of
    them at INT_MAX (transitioned, nothing to wait for)."""
    times = [NOW + 60, NOW, 2**31 - 1]
    return Workunit.objects.bulk_create(
        Workunit(project=app.project, app=app, name=f"wu_{i:05d}", create_time=NOW, transition_time=times[i % 3])
        for i in range(130)
    )


@pytest.mark.parametrize("sort", ["transition_time", "-transition_time"])
def test_list_sorts_by_transition_time_both_ways_across_pages_and_back(client, tied, sort):
    expected = [
        wu.name for wu in sorted(tied, key=lambda wu: (wu.transition_time, wu.id), reverse=sort.startswith("-"))
    ]
    seen, pages = walk(client, f"/project/workunits/?sort={sort}")
    assert seen == expected and len(pages) == 3
    assert all(f"sort={sort}" in page.context["next_url"] for page in pages[:-1])
    back, _ = walk(client, "/project/workunits/" + pages[-1].context["prev_url"], key="prev_url")
    assert back == expected[50:100] + expected[:50]


def test_list_filters_by_app_error_bit_state_and_name(client, many, app):
    assert len(names(client.get(f"/project/workunits/?app={many.id}"))) == 5
    assert len(names(client.get("/project/workunits/?error=CANCELLED"))) == 5
    assert len(names(client.get("/project/workunits/?error=some"))) == 8
    assert len(names(client.get("/project/workunits/?error=none&app=" + str(app.id)))) == 50
    assert names(client.get("/project/workunits/?state=assimilate_ready&sort=id")) == [
        "wu_00200",
        "wu_00201",
        "wu_00202",
    ]
    assert names(client.get("/project/workunits/?name=wu_0010&sort=name")) == [f"wu_0010{i}" for i in range(5)]


def test_transition_due_filter_uses_the_clock(client, app):
    make_workunits(app, 2, transition_time=NOW)
    make_workunits(app, 1, start=5, transition_time=2**31 - 1)
    assert len(names(client.get("/project/workunits/?state=transition_due"))) == 2


@pytest.mark.parametrize(
    "query",
    [
        "app=999",
        "app=x",
        "state=bogus",
        "error=BIT",
        "sort=mod_time",
        "sort=transition",
        "after=%%%",
        "before=W10",
        "name=" + "x" * 300,
        "sort=transition_time&after=" + encode_cursor("soon", 3),
        "sort=-transition_time&before=" + encode_cursor(2**70, 3),
    ],
)
def test_bad_filters_get_a_400_with_the_reason(client, many, query):
    page = client.get("/project/workunits/?" + query)
    assert page.status_code == 400
    assert "These filters are not valid" in page.content.decode()
    assert client.get("/project/workunits.csv?" + query).status_code == 400


@pytest.mark.parametrize("sort", list(SORTS))
def test_list_queries_do_not_grow_with_rows(client, app, django_assert_max_num_queries, sort):
    make_workunits(app, 5)
    # the project, the app filter's check, the rows, their results' summary, the bounded match
    # count and the app choices
    with django_assert_max_num_queries(6):
        small = client.get(f"/project/workunits/?app={app.id}&sort={sort}")
    make_workunits(app, 200, start=10)
    with django_assert_max_num_queries(6):
        big = client.get(f"/project/workunits/?app={app.id}&sort={sort}", HTTP_HX_REQUEST="true")
    with django_assert_max_num_queries(6):
        after = client.get(link(big, "next"), HTTP_HX_REQUEST="true")
    with django_assert_max_num_queries(6):
        before = client.get(link(after, "prev"))
    assert len(names(small)) == 5 and len(names(big)) == 50 and len(names(after)) == 50
    assert names(before) == names(big)


def test_list_fragment_is_just_the_table(client, many):
    html = client.get("/project/workunits/?error=CANCELLED", HTTP_HX_REQUEST="true").content.decode()
    fragment = parse(html)
    assert fragment.find(True).attrs.get("id") == "wu-table" and fragment.find("html") is None
    assert "wu_00100" in html


def polled_url(html):
    """The URL the table polls, or None when it does not poll."""
    table = parse(html).find("div", id="wu-table")
    polls = table is not None and table.get("hx-trigger", "").startswith("every 2s")
    return table.get("hx-get") if polls else None


def test_list_table_polls_its_own_url_with_the_filters_and_cursor(client, many, django_assert_max_num_queries):
    first = client.get("/project/workunits/?error=none&sort=-transition_time")
    assert polled_url(first.content.decode()) == "/project/workunits/?error=none&sort=-transition_time"
    url = link(first, "next")
    with django_assert_max_num_queries(4):
        fragment = client.get(url, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    assert polled_url(fragment.content.decode()) == url
    with django_assert_max_num_queries(4):
        again = client.get(polled_url(fragment.content.decode()), HTTP_HX_REQUEST="true")
    assert names(again) == names(fragment) and polled_url(again.content.decode()) == url


def test_list_table_with_bad_filters_does_not_poll(client, many):
    fragment = client.get("/project/workunits/?sort=bogus", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 400 and polled_url(fragment.content.decode()) is None


def test_list_links_keep_the_filters(client, many):
    page = client.get("/project/workunits/?error=none&sort=name")
    assert "error=none" in page.context["next_url"] and "sort=name" in page.context["next_url"]
    assert page.context["csv_url"] == "/project/workunits.csv?error=none&sort=name"


def test_csv_exports_every_filtered_row(client, many, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        response = client.get("/project/workunits.csv?error=some&sort=name")
        body = b"".join(response.streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0][:3] == ["id", "name", "app_name"]
    assert [r[1] for r in rows[1:]] == [f"wu_0010{i}" for i in range(5)] + ["wu_00200", "wu_00201", "wu_00202"]
    assert response["Content-Disposition"].startswith("attachment")


def test_staff_see_bulk_actions_and_others_do_not(client, many, django_user_model):
    assert "Cancel…" not in client.get("/project/workunits/").content.decode()
    client.force_login(UserFactory(username="boss", is_staff=True))
    assert "Cancel…" in client.get("/project/workunits/").content.decode()


def test_keyset_pages_refuse_a_key_with_ties(app):
    from backend.keyset import keyset_page

    with pytest.raises(ValueError, match="unique sort key"):
        keyset_page(Workunit.objects.all(), "create_time", False)


def test_canonical_result_links_to_the_result_page(client, app):
    [wu] = make_workunits(app, 1)
    result = ResultFactory(workunit=wu, name="r_0")
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=result)
    html = client.get("/project/workunits/").content.decode()
    assert f'href="/project/results/{result.id}/"' in html
    assert f'href="/project/workunits/{wu.id}/"' in html


def test_the_filter_form_offers_an_app_made_since_the_last_view(client, app):
    assert parse(client.get("/project/workunits/")).find(string="seti") is None
    AppFactory(name="seti")
    seti = parse(client.get("/project/workunits/")).find("option", string="seti")
    assert seti["value"].isdigit() and not seti.has_attr("selected")
    chosen = parse(client.get(f"/project/workunits/?app={app.id}"))
    einstein = chosen.find("option", value=str(app.id))
    assert einstein.get_text() == "einstein" and einstein.has_attr("selected")


def test_another_projects_app_is_a_filter_error_not_an_empty_list(client, many):
    """The app filter offers the project's apps only; another project's app id is refused with
    the reason, on the page, its fragment and the CSV, rather than matching no workunit."""
    other = ProjectFactory(slug="other")
    theirs = AppFactory(project=other, name="theirs")
    make_workunits(theirs, 2, start=500)
    offered = parse(client.get("/project/workunits/")).find("select", attrs={"name": "app"})
    assert "theirs" not in texts(offered.find_all("option")) and "seti" in texts(offered.find_all("option"))
    for path in ("/project/workunits/", f"/projects/{Project.demo().slug}/workunits/"):
        page = client.get(f"{path}?app={theirs.id}")
        assert page.status_code == 400
        assert f"no app {theirs.id} in this project" in page.content.decode()
        assert client.get(f"{path}?app={theirs.id}", headers={"HX-Request": "true"}).status_code == 400
    assert client.get(f"/project/workunits.csv?app={theirs.id}").status_code == 400
    # and in its own project, the same id is a filter like any other
    own = client.get(f"/projects/other/workunits/?app={theirs.id}")
    assert own.status_code == 200 and "wu_00500" in own.content.decode()
    offered = parse(client.get("/projects/other/workunits/")).find("select", attrs={"name": "app"})
    assert texts(offered.find_all("option")) == ["all apps", "theirs"]
