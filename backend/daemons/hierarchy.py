"""Where each project's files live, by one rule (``project_dir``): every project has its own
download, upload, keys and assimilated directories (DESIGN.md "Projects"; BOINC gives each
project its own ``download/``, ``upload/`` and ``keys/``).

- The demo project keeps the places it had before there were projects, so existing data and
  settings still work: ``settings.DOWNLOAD_DIR``, ``settings.UPLOAD_DIR``, and
  ``BOINCWEB_DATA_DIR/keys`` and ``BOINCWEB_DATA_DIR/assimilated``;
- every other project (live or a world's) has ``BOINCWEB_DATA_DIR/projects/<slug>/`` holding
  ``download/``, ``upload/``, ``keys/`` and ``assimilated/``.

BOINC spreads files over a fan-out of subdirectories (the "download/upload hierarchy"); ours
are flat, one file per name, which the download view and the file_upload_handler share.

A pass that creates or deletes many files does so from a few threads (``in_parallel``): each
create, rename or unlink waits on the file system's journal, and waits in parallel overlap.
"""

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from django.conf import settings

from backend.models import Project

T = TypeVar("T")
R = TypeVar("R")

# the directories each project has
KINDS = ("download", "upload", "keys", "assimilated")


def project_dir(project: Project, kind: str) -> Path:
    """The directory of ``project``'s files of ``kind`` (one of KINDS): the rule above."""
    if kind not in KINDS:
        raise ValueError(f"no project directory {kind!r}; there are {', '.join(KINDS)}")
    if project.slug == Project.DEMO_SLUG:
        if kind == "download":
            return Path(settings.DOWNLOAD_DIR)
        if kind == "upload":
            return Path(settings.UPLOAD_DIR)
        return Path(settings.BOINCWEB_DATA_DIR) / kind
    return projects_root(project) / kind


def projects_root(project: Project) -> Path:
    """The directory that holds every file of ``project`` but the demo's (whose are in the
    settings' places, above): ``BOINCWEB_DATA_DIR/projects/<slug>``, removed with the project."""
    if project.slug == Project.DEMO_SLUG:
        raise ValueError("the demo project's files are in the settings' directories, not under projects/")
    return Path(settings.BOINCWEB_DATA_DIR) / "projects" / project.slug


def download_path(project: Project, name: str) -> Path:
    return project_dir(project, "download") / name


def upload_path(project: Project, name: str) -> Path:
    return project_dir(project, "upload") / name


def partial_upload_path(project: Project, name: str) -> Path:
    """Where the file upload handler keeps the part of ``name`` received so far."""
    final = upload_path(project, name)
    return final.with_name(f".{name}.part")


def write_file(path: Path, data: bytes) -> str:
    """Write ``data`` to ``path`` atomically (a rename), creating the directory; return its md5."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    partial.write_bytes(data)
    os.replace(partial, path)
    return hashlib.md5(data).hexdigest()


def assimilated_path(project: Project, app_name: str, wu_name: str) -> Path:
    """Where the default assimilator keeps a copy of a workunit's canonical output."""
    return project_dir(project, "assimilated") / app_name / wu_name


FILE_THREADS = 8


def in_parallel(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(item) for item in items]``, run on up to FILE_THREADS threads, in order.

    Each thread takes one run of consecutive items: a task per item would cost a future, a
    lock and a hand-over between threads each, as much as the small file operation itself
    when the CPUs are busy."""
    items = list(items)
    if len(items) < 2:
        return [fn(item) for item in items]
    threads = min(FILE_THREADS, len(items))
    size = -(-len(items) // threads)
    runs = [items[start : start + size] for start in range(0, len(items), size)]
    with ThreadPoolExecutor(len(runs)) as pool:
        return [result for done in pool.map(lambda run: [fn(item) for item in run], runs) for result in done]


def write_files(pairs: Iterable[tuple[Path, bytes]]) -> list[str]:
    """``write_file`` for each ``(path, data)``, in parallel; returns the md5s in order."""
    return in_parallel(lambda pair: write_file(*pair), pairs)


def write_new_file(folder: int, name: str, data: bytes) -> None:
    """Write ``data`` to the file ``name`` of the open directory ``folder`` in place (no
    temporary file and rename).

    Only for a file nobody can ask for yet: the input of a workunit the caller's transaction
    is creating, whose name no reply has carried. A rename is a second journalled change of
    the directory, and on a disk PostgreSQL keeps busy it is most of the cost of a small file.
    The name is looked up in the open directory, not walked from the root each time.
    """
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _write_new_files(folder: int, files: list[tuple[str, bytes]]) -> None:
    for name, data in files:
        write_new_file(folder, name, data)


@contextmanager
def new_files_written(folder: Path, files: Iterable[tuple[str, bytes]]) -> Iterator[None]:
    """``write_new_file`` for each ``(name, data)`` in ``folder`` (made if missing), one after
    the other in a thread of their own while the ``with`` block runs; the block's end waits
    for every write and raises the first error. For the transaction that creates the files'
    rows: put the block inside it, so that it commits only once every file is there, and its
    inserts overlap the writes instead of waiting for them.

    One thread, not ``in_parallel``'s few: creating files in one directory takes its lock one
    file at a time anyway, and each further thread cost the caller its start and a share of
    the interpreter while it sent its rows (the median of 20 creations of 1,000 workunits
    was 10 % longer with 8 threads, of 4 of 5,000 16 %)."""
    files = list(files)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with ThreadPoolExecutor(1) as pool:
            writes = pool.submit(_write_new_files, fd, files)
            yield
            writes.result()
    finally:
        os.close(fd)
