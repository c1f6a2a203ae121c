"""Claiming and writing a pass's rows (reference/server.md §5): BOINC's ``--mod n i`` sharding
(sched_util.h ID_CLAUSE: ``id % n == i``), batches in id order, and the set writes every pass
ends with, chunk by chunk, including the transitioner's compare-and-set of transition_time
(transitioner.cpp, BOINC PR #3603)."""

import pytest
from django.db import transaction

from backend.daemons.claim import (
    claim,
    compare_and_set,
    insert_new,
    insert_rows,
    read_rows,
    rows_by_id,
    shard,
    update_rows,
)
from backend.models import App, AppVersion, File, Host, Result, Workunit
from tests.factories import AppVersionFactory, HostFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def wus(project):
    return [project.workunit(transition_time=100 + i) for i in range(7)]


def test_mod_n_index_i_takes_the_rows_whose_id_modulo_n_is_i(wus):
    ids = [wu.pk for wu in wus]
    for index in range(3):
        got = sorted(shard(Workunit.objects.all(), 3, index).values_list("id", flat=True))
        assert got == [i for i in ids if i % 3 == index]
    assert sorted(shard(Workunit.objects.all(), 1, 0).values_list("id", flat=True)) == ids


def test_a_claim_takes_the_batch_with_the_lowest_ids(wus):
    with transaction.atomic():
        assert [wu.pk for wu in claim(Workunit.objects.all(), 3)] == [wu.pk for wu in wus[:3]]
        evens = [wu.pk for wu in claim(Workunit.objects.all(), 10, mod=2, index=0)]
    assert evens == [wu.pk for wu in wus if wu.pk % 2 == 0]


def test_update_rows_writes_each_rows_own_values_across_chunks(wus):
    for i, wu in enumerate(wus):
        wu.target_nresults, wu.need_validate, wu.canonical_credit = 10 + i, i % 2 == 1, i / 4
    update_rows(Workunit, wus[:6], ["target_nresults", "need_validate", "canonical_credit"], chunk=4)
    got = list(Workunit.objects.order_by("id").values_list("target_nresults", "need_validate", "canonical_credit"))
    assert got[:6] == [(10 + i, i % 2 == 1, i / 4) for i in range(6)]
    assert got[6] == (1, False, 0.0)  # the seventh row was not in the list: unchanged


def test_compare_and_set_writes_the_new_value_only_where_the_read_one_is_still_there(wus):
    Workunit.objects.filter(pk=wus[1].pk).update(transition_time=5)  # changed meanwhile
    values = {wu.pk: (100 + i, 1000 + i) for i, wu in enumerate(wus[:5])}
    compare_and_set(Workunit, "transition_time", values, otherwise=42, chunk=2)
    got = list(Workunit.objects.order_by("id").values_list("transition_time", flat=True))
    assert got == [1000, 42, 1002, 1003, 1004, 105, 106]


def test_update_rows_writes_none_to_a_nullable_column_and_converts_plain_values(project, wus):
    canonical = project.result(wus[0])
    Workunit.objects.filter(pk=wus[0].pk).update(canonical_result=canonical)
    wus[0].canonical_result_id = None  # a nullable foreign key back to NULL
    wus[0].need_validate = 1  # an int where the column is a boolean
    update_rows(Workunit, wus[:1], ["canonical_result", "need_validate"])
    assert Workunit.objects.filter(pk=wus[0].pk).values_list("canonical_result_id", "need_validate").get() == (
        None,
        True,
    )


def field_values(row):
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def test_read_rows_builds_the_rows_the_orm_would_with_every_field_of_its_type(project, wus):
    # booleans, floats, big integers, strings, nullable foreign keys: a value the ORM converts
    # (SQLite's 0/1 for a boolean) must come out as the ORM gives it
    AppVersionFactory(app=project.app, deprecated=True, beta=True, plan_class="mt")
    HostFactory(gpu_count=2, domain_name="h-é")
    project.result(wus[0])
    for model in (App, AppVersion, Host, Workunit, Result):
        orm = [field_values(row) for row in model.objects.order_by("id")]
        raw = [field_values(row) for row in read_rows(model)]
        assert raw == orm, model.__name__
        assert [type(v) for v in raw[-1].values()] == [type(v) for v in orm[-1].values()], model.__name__


def test_read_rows_filters_locks_and_reads_by_id(wus):
    ids = [wu.pk for wu in wus]
    with transaction.atomic():
        locked = read_rows(Workunit, "t.transition_time >= %s", [103], lock=True)
    assert [wu.pk for wu in locked] == ids[3:]
    assert sorted(rows_by_id(Workunit, ids[1:3])) == ids[1:3]
    assert rows_by_id(Workunit, []) == {}
    # a row is whole: saving it writes back what was read (mod_time is the save's own time)
    before = field_values(Workunit.objects.get(pk=ids[0]))
    rows_by_id(Workunit, [ids[0]])[ids[0]].save()
    after = field_values(Workunit.objects.get(pk=ids[0]))
    assert after.pop("mod_time") >= before.pop("mod_time")
    assert after == before


def test_insert_rows_saves_the_rows_bulk_create_would_with_their_ids(project, wus):
    # the same unsaved rows each way: every column as bulk_create writes it (mod_time is each
    # write's own time), ids set on the rows in order, and the rows readable through the ORM
    def new_results(tag):
        return [
            Result(
                project_id=project.app.project_id,
                app=project.app,
                workunit=wu,
                name=f"{wu.name}_{tag}",
                random=7 + i,
                priority=i,
                report_deadline=10**12 + i,
                host_id=None,
            )
            for i, wu in enumerate(wus[:3])
        ]

    bulk = Result.objects.bulk_create(new_results("a"))
    ours = insert_rows(Result, new_results("b"))
    assert all(row.pk is not None and not row._state.adding for row in ours)
    assert [row.pk for row in ours] == sorted(row.pk for row in ours)
    assert not {row.pk for row in ours} & {row.pk for row in bulk}
    for a, b in zip(bulk, ours, strict=True):
        orm_a, orm_b = field_values(Result.objects.get(pk=a.pk)), field_values(Result.objects.get(pk=b.pk))
        assert orm_b == field_values(b) | {"mod_time": orm_b["mod_time"]}
        for name in ("id", "name", "mod_time"):
            del orm_a[name], orm_b[name]
        assert orm_b == orm_a
    files = insert_rows(File, [File(project_id=project.app.project_id, name=f"in{i}", nbytes=i) for i in range(2)])
    assert list(File.objects.filter(pk__in=[f.pk for f in files]).values_list("name", "nbytes")) == [
        ("in0", 0),
        ("in1", 1),
    ]
    assert insert_rows(Result, []) == []


def test_insert_new_stores_the_rows_bulk_create_would_fixed_columns_once_varying_ones_per_row(project):
    wu_fixed = dict(project_id=project.app.project_id, app_id=project.app.pk, create_time=5, rsc_fpops_est=3e12)
    names = ["new_a", "new_b", "new_c"]
    ids = insert_new(Workunit, wu_fixed, dict(name=names, priority=[1, 2, 3]))
    assert ids == sorted(ids) and len(set(ids)) == 3
    bulk = Workunit.objects.bulk_create(
        [Workunit(**wu_fixed, name=f"bulk_{name}", priority=p) for name, p in zip(names, [1, 2, 3], strict=True)]
    )
    for pk, twin in zip(ids, bulk, strict=True):
        ours, theirs = field_values(Workunit.objects.get(pk=pk)), field_values(Workunit.objects.get(pk=twin.pk))
        assert ours.pop("name") == theirs.pop("name").removeprefix("bulk_")
        for name in ("id", "mod_time"):
            del ours[name], theirs[name]
        assert ours == theirs
    # rows nobody refers to: no ids drawn, the table's own numbering
    files = insert_new(File, dict(project_id=project.app.project_id), dict(name=["f1", "f2"], nbytes=[1, 2]))
    assert insert_new(Workunit.input_files.through, {}, dict(workunit_id=ids[:2], file_id=files), ids=False) == []
    assert sorted(Workunit.input_files.through.objects.values_list("workunit_id", "file_id")) == list(
        zip(ids[:2], files, strict=True)
    )


def test_insert_new_refuses_columns_of_unequal_length_and_unknown_ones_writing_nothing(project):
    fixed = dict(project_id=project.app.project_id)
    with pytest.raises(ValueError, match="one length"):
        insert_new(File, fixed, dict(name=["a", "b"], nbytes=[1]))
    with pytest.raises(ValueError, match="no_such_column"):
        insert_new(File, fixed, dict(name=["a"], no_such_column=[1]))
    with pytest.raises(ValueError, match="project_id"):
        insert_new(File, fixed, dict(name=["a"], project_id=[1]))
    assert not File.objects.filter(name__in=["a", "b"]).exists()
