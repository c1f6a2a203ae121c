"""The file deleter (reference/server.md §3.9: sched/file_deleter.cpp).

Each pass deletes the output files of results whose file_delete_state is READY, then the input
files of workunits READY, three results to one workunit per pass as BOINC's 1500/500 split
(workunits take what results leave of the batch).
Rows are claimed with SKIP LOCKED on PostgreSQL and written compare-and-set from READY.

- A result's outputs are unlinked from the upload directory, with the part of an upload the
  client abandoned (``.NAME.part``, left by the file upload handler when a result was
  reported without its output or timed out mid-upload); a workunit's inputs (with any
  ``.gz`` and ``.md5`` beside them) from the download directory, unless the workunit's name
  contains "nodelete", or the input is still read by a workunit whose files are not being
  deleted (a shared, locality-scheduling input).
- A file marked ``no_delete`` (BOINC's ``<no_delete/>`` in its ``<file_info>``), input or
  output, is never deleted, and its File row stays as it was; the row of the workunit or
  result becomes DONE all the same (file_deleter.cpp wu_delete_files, result_delete_files).
- The unlinks of a pass run on a few threads, each directory checked once per pass.
- A file already gone is not an error. A missing directory (as BOINC fears, an unmounted
  file system) or a failed unlink is: the row becomes FILE_DELETE_ERROR, otherwise DONE; the
  File rows of deleted files become DONE too.
- Errors are retried every ``ERROR_INTERVAL`` (an hour): one instance per interval, chosen by a
  compare-and-set on DaemonStatus.last_retry_time, puts the ERROR rows back to READY.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from django.db import transaction

from backend.daemons.claim import claim
from backend.daemons.hierarchy import in_parallel, partial_upload_path, project_dir
from backend.daemons.id_sets import ids_in
from backend.events import Event, event, record
from backend.models import DaemonStatus, File, FileDeleteState, Project, Result, Workunit

ACTOR = "file_deleter"
ERROR_INTERVAL = 3600


def unlink(path: Path) -> bool:
    """Delete ``path``; False if the unlink failed (a file already gone is fine)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def unlink_each(paths_of: Mapping[int, Sequence[Path]], parts_of: Mapping[int, Path] | None = None) -> dict[int, bool]:
    """Delete every row's paths (``{row id: [paths]}``) and the part an upload may have left
    (``parts_of``: ``{row id: path}``); returns ``{row id: ok}``.

    A row is not ok if a directory of its paths is missing or an unlink failed. A part is
    only tried where its directory is there (nothing can be left where there is none), and
    one that is not there is no error: trying the unlink costs what looking for the file
    would. Each directory is looked at once per pass, and the unlinks run in parallel.
    """
    parts_of = parts_of or {}
    dirs = {path.parent for paths in paths_of.values() for path in paths} | {part.parent for part in parts_of.values()}
    present = {d for d in dirs if d.is_dir()}
    todo = [path for paths in paths_of.values() for path in paths if path.parent in present]
    todo += [part for part in parts_of.values() if part.parent in present]
    failed = {path for path, ok in zip(todo, in_parallel(unlink, todo)) if not ok}
    return {
        pk: all(p.parent in present and p not in failed for p in paths) and parts_of.get(pk) not in failed
        for pk, paths in paths_of.items()
    }


def finish(
    model: type[Result] | type[Workunit],
    outcomes: Mapping[int, int],
    *,
    now: int,
    what: str,
    workunit_of: Mapping[int, int] | None = None,
) -> list[Event]:
    """Write DONE / ERROR for rows that were READY; returns the events."""
    events = []
    for state in (FileDeleteState.DONE, FileDeleteState.ERROR):
        ids = [pk for pk, s in outcomes.items() if s == state]
        if not ids:
            continue
        ready = model.objects.filter(ids_in(model, "id", ids), file_delete_state=FileDeleteState.READY)
        ready.update(file_delete_state=state)
        reason = f"{what} deleted" if state == FileDeleteState.DONE else f"could not delete {what}"
        for pk in ids:
            # workunit_of is given whenever model is Result
            subject = {"result_id": pk, "workunit_id": workunit_of[pk]} if model is Result else {"workunit_id": pk}  # type: ignore[index]
            events.append(
                event(
                    time=now,
                    actor=ACTOR,
                    field="file_delete_state",
                    old=FileDeleteState.READY,
                    new=state,
                    reason=reason,
                    **subject,  # type: ignore[arg-type]  # ids only, though mypy matches it to every keyword
                )
            )
    return events


def delete_result_files(*, project: Project, now: int, batch_size: int, mod: int, index: int) -> int:
    with transaction.atomic():
        results = claim(
            Result.objects.filter(project=project).files_ready_to_delete().only("id", "workunit", "name", "random"),
            batch_size,
            mod=mod,
            index=index,
        )
        if not results:
            return 0
        upload = project_dir(project, "upload")
        files: dict[int, list[tuple[int, str]]] = {}
        for pk, result_id, name in File.objects.filter(
            ids_in(File, "result", (r.pk for r in results)), no_delete=False
        ).values_list("id", "result_id", "name"):
            files.setdefault(result_id, []).append((pk, name))
        done = unlink_each(
            {r.pk: [upload / name for _, name in files.get(r.pk, ())] for r in results},
            # the part of an output the client abandoned (``.NAME.part``, hierarchy.partial_upload_path)
            {r.pk: partial_upload_path(project, r.output_file_name(0)) for r in results},
        )
        outcomes = {pk: FileDeleteState.DONE if ok else FileDeleteState.ERROR for pk, ok in done.items()}
        deleted = [file_id for pk, ok in done.items() if ok for file_id, _ in files.get(pk, ())]
        File.objects.filter(ids_in(File, "id", deleted)).update(file_delete_state=FileDeleteState.DONE)
        record(
            finish(Result, outcomes, now=now, what="output files", workunit_of={r.pk: r.workunit_id for r in results}),
            project.pk,
        )
        return len(results)


def delete_workunit_files(*, project: Project, now: int, batch_size: int, mod: int, index: int) -> int:
    with transaction.atomic():
        wus = claim(
            Workunit.objects.filter(project=project).files_ready_to_delete().only("id", "name"),
            batch_size,
            mod=mod,
            index=index,
        )
        if not wus:
            return 0
        ids = [wu.pk for wu in wus]
        through = Workunit.input_files.through
        links = list(
            through.objects.filter(ids_in(through, "workunit", ids)).values_list(
                "workunit_id", "file_id", "file__name", "file__no_delete"
            )
        )
        # inputs another workunit still needs (its files are not being deleted)
        shared = set(
            through.objects.filter(ids_in(through, "file", {file_id for _, file_id, _, _ in links}))
            .exclude(ids_in(through, "workunit", ids))
            .exclude(workunit__file_delete_state=FileDeleteState.DONE)
            .values_list("file_id", flat=True)
        )
        kept = {wu.pk for wu in wus if "nodelete" in wu.name}
        doomed: dict[int, list[tuple[int, str]]] = {pk: [] for pk in ids}
        for wu_id, file_id, name, no_delete in links:
            if file_id not in shared and not no_delete and wu_id not in kept:
                doomed[wu_id].append((file_id, name))
        download = project_dir(project, "download")
        done = unlink_each(
            {
                pk: [download / f"{name}{tail}" for _, name in files for tail in ("", ".gz", ".md5")]
                for pk, files in doomed.items()
            }
        )
        outcomes = {pk: FileDeleteState.DONE if ok else FileDeleteState.ERROR for pk, ok in done.items()}
        deleted = [file_id for pk, ok in done.items() if ok for file_id, _ in doomed[pk]]
        File.objects.filter(ids_in(File, "id", deleted)).update(file_delete_state=FileDeleteState.DONE)
        record(finish(Workunit, outcomes, now=now, what="input files"), project.pk)
        return len(wus)


def retry_errors(*, project: Project, now: int) -> int:
    """Once per ERROR_INTERVAL, one instance puts every FILE_DELETE_ERROR row of ``project``
    back to READY."""
    status, _ = DaemonStatus.objects.get_or_create(project=project, name=ACTOR)
    if now - status.last_retry_time < ERROR_INTERVAL:
        return 0
    if not DaemonStatus.objects.filter(pk=status.pk, last_retry_time=status.last_retry_time).update(
        last_retry_time=now
    ):
        return 0
    events: list[Event] = []
    for model, key in ((Result, "result_id"), (Workunit, "workunit_id")):
        with transaction.atomic():
            ids = [
                row.pk
                for row in claim(
                    model.objects.filter(project=project, file_delete_state=FileDeleteState.ERROR).only("id"), 10**6
                )
            ]
            model.objects.filter(id__in=ids, file_delete_state=FileDeleteState.ERROR).update(
                file_delete_state=FileDeleteState.READY
            )
            events.extend(
                event(
                    time=now,
                    actor=ACTOR,
                    field="file_delete_state",
                    old=FileDeleteState.ERROR,
                    new=FileDeleteState.READY,
                    reason="retrying deletion",
                    **{key: pk},
                )
                for pk in ids
            )
    record(events, project.pk)
    return len(events)


def run_once(*, project: Project, now: int, batch_size: int, mod: int = 1, index: int = 0) -> int:
    """One pass over ``project``'s files: retry old errors when due, then result outputs, then
    workunit inputs: up to three quarters of ``batch_size`` results (BOINC's 1500 to 500), and
    workunits in the rest of the batch, at least a quarter of it, so that a pass with few
    results left takes that many more workunits."""
    retry_errors(project=project, now=now)
    results = delete_result_files(
        project=project, now=now, batch_size=max(1, batch_size * 3 // 4), mod=mod, index=index
    )
    wus = delete_workunit_files(
        project=project, now=now, batch_size=max(1, batch_size // 4, batch_size - results), mod=mod, index=index
    )
    return results + wus
