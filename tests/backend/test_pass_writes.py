"""What the work generator, the assimilator and the file deleter write when a pass handles many
rows at once: the same rows as one at a time (create_work's inserts of plain values, the
assimilator's copies made on a few threads), and a file deleter pass that gives workunits the
part of its batch that results leave (file_deleter.cpp's 1500/500 split per pass)."""

from django.forms.models import model_to_dict

from backend.daemons import assimilator, file_deleter, work_generator
from backend.daemons.hierarchy import upload_path
from backend.models import (
    AssimilatedResult,
    AssimilateState,
    File,
    FileDeleteState,
    Outcome,
    Result,
    ServerState,
    Workunit,
)
from tests.factories import NOW, FileFactory, demo_project


def test_create_work_stores_every_column_a_workunit_built_from_its_fields_has(project):
    params = work_generator.work_parameters(project.app, dict(rsc_memory_bound=2e8, priority=3))
    made = list(work_generator.create_work(project.app, ["job_a", "job_b"], now=NOW, rsc_memory_bound=2e8, priority=3))
    assert [wu.name for wu in made] == ["job_a", "job_b"]
    expected = Workunit(
        project=demo_project(), app=project.app, name="job_b", create_time=NOW, transition_time=NOW, **params
    )
    skip = ("id", "mod_time", "input_files")
    stored = {k: v for k, v in model_to_dict(made[1]).items() if k not in skip}
    assert stored == {k: v for k, v in model_to_dict(expected).items() if k not in skip}
    assert made[1].mod_time is not None
    # each workunit reads its own input, a row of the same project
    [input_file] = made[1].input_files.all()
    assert (input_file.name, input_file.kind, input_file.project_id) == ("job_b.in", File.Kind.INPUT, demo_project().pk)
    assert (input_file.nbytes, input_file.file_delete_state, input_file.result_id) == (1024, FileDeleteState.INIT, None)


def test_a_pass_copies_each_canonical_output_and_names_no_copy_of_one_that_is_gone(project):
    wus, outputs = [], []
    for i in range(3):
        wu = project.workunit(assimilate_state=AssimilateState.READY)
        canonical = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
        Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical)
        out = FileFactory(result=canonical, md5_cksum=f"{i}" * 32, nbytes=10 + i)
        if i != 1:  # the second one's output is no longer on disk
            path = upload_path(demo_project(), out.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f"output {i}".encode())
        wus.append(wu)
        outputs.append(out)
    assert assimilator.run_once(project=demo_project(), now=NOW, batch_size=10) == 3
    rows = {row.workunit_id: row for row in AssimilatedResult.objects.all()}
    for i, (wu, out) in enumerate(zip(wus, outputs)):
        row = rows[wu.pk]
        assert (row.output_md5, row.output_nbytes) == (out.md5_cksum, out.nbytes)
        if i == 1:
            assert row.path == ""
        else:
            assert open(row.path, "rb").read() == f"output {i}".encode()
    assert set(Workunit.objects.values_list("assimilate_state", flat=True)) == {AssimilateState.DONE}


def test_a_file_deleter_pass_gives_workunits_the_batch_results_leave(project):
    for i in range(10):
        wu = project.workunit(file_delete_state=FileDeleteState.READY)
        if i < 2:
            project.result(
                wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, file_delete_state=FileDeleteState.READY
            )
    upload_path(demo_project(), "x").parent.mkdir(parents=True, exist_ok=True)
    assert file_deleter.run_once(project=demo_project(), now=NOW, batch_size=8) == 2 + 6
    assert Result.objects.filter(file_delete_state=FileDeleteState.DONE).count() == 2
    assert Workunit.objects.filter(file_delete_state=FileDeleteState.DONE).count() == 6
