"""Running Debian's real BOINC client against this project (reference/protocol.md §2, §9, §11).

``ClientDir`` prepares a private data directory: ``cc_config.xml`` (debug log flags, no contact
with the reference site), ``global_prefs_override.xml`` (never suspend for other CPU load,
which a busy machine always has), ``gui_rpc_auth.cfg``, and optionally, for the anonymous
platform, ``projects/<escaped master URL>/app_info.xml`` with a shell-script application, which
must be there before the project is attached (§2, §6.1). A client attached to several projects
has one ``ClientDir`` per project over the same path, each naming its master URL; a project
besides the one given on the command line is attached by its account file (§2, way 2), whose
project preferences the project's first scheduler reply replaces with its own (§4.3).

``start_client`` launches ``boinc`` in a new session (its own process group, which its
applications share, §6.3) with the flags that keep it on loopback and quick: no info fetch,
no benchmarks or GPUs, short back-offs. ``quit_client`` asks it to quit and waits up to
10 s; ``stop_client`` kills the whole group (§11 step 6: quit, wait, then kill).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

GUI_RPC_PASSWORD = "boincweb"

# A non-API application: reads ``in`` (when present), writes ``out``, and says it finished
# (§6.2). ``EXIT`` is its exit code; stderr goes to the report's stderr_out.
WORKER_SCRIPT = """#!/bin/sh
echo "worker starting" >&2
if [ -f in ]; then tr 'a-z' 'A-Z' < in > out; else echo "no input" > out; fi
echo "{name} done" >> out
if [ "{exit_code}" != 0 ]; then echo "failing on purpose" >&2; exit {exit_code}; fi
echo 0 > boinc_finish_called
exit 0
"""


def client_binary() -> str | None:
    """The path of the ``boinc`` client, or None when it is not installed."""
    return shutil.which("boinc")


def escape_project_url(url: str) -> str:
    """The project directory name the client derives from a master URL (§2)."""
    name = re.sub(r"^[A-Za-z]+://", "", url)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return name[:-1] if name.endswith("_") else name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_script(name: str = "worker", exit_code: int = 0) -> str:
    return WORKER_SCRIPT.format(name=name, exit_code=int(exit_code))


@dataclass
class ClientDir:
    path: Path
    master_url: str

    @property
    def project_dir(self) -> Path:
        return self.path / "projects" / escape_project_url(self.master_url)

    def prepare(self) -> Self:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "cc_config.xml").write_text(
            "<cc_config>\n<log_flags><sched_op_debug/><file_xfer_debug/><task_debug/>"
            "<work_fetch_debug/></log_flags>\n"
            "<options><dont_contact_ref_site>1</dont_contact_ref_site></options>\n"
            "</cc_config>\n"
        )
        (self.path / "global_prefs_override.xml").write_text(
            "<global_preferences>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n"
            "<disk_max_used_pct>100</disk_max_used_pct>\n<disk_min_free_gb>0</disk_min_free_gb>\n"
            "</global_preferences>\n"
        )
        (self.path / "gui_rpc_auth.cfg").write_text(GUI_RPC_PASSWORD + "\n")
        return self

    def install_anonymous_app(self, app_name: str, *, version_num: int = 100, script: str | None = None) -> None:
        """Put ``app_info.xml`` and the script in the project directory (§6.1)."""
        self.project_dir.mkdir(parents=True, exist_ok=True)
        executable = self.project_dir / f"{app_name}_worker.sh"
        executable.write_text(script or worker_script(app_name))
        executable.chmod(0o755)
        (self.project_dir / "app_info.xml").write_text(
            f"<app_info>\n<app><name>{app_name}</name></app>\n"
            f"<file_info><name>{executable.name}</name><executable/></file_info>\n"
            f"<app_version>\n<app_name>{app_name}</app_name>\n"
            f"<version_num>{version_num}</version_num>\n"
            f"<file_ref><file_name>{executable.name}</file_name><main_program/></file_ref>\n"
            "</app_version>\n</app_info>\n"
        )

    def write_account_file(self, authenticator: str) -> None:
        """Attach the client to this project at its next start: ``account_<escaped URL>.xml``
        with the key and empty project preferences (§2), so the client takes BOINC's resource
        share of 100 until the project's scheduler sends the volunteer's own."""
        (self.path / f"account_{escape_project_url(self.master_url)}.xml").write_text(
            f"<account>\n<master_url>{self.master_url}</master_url>\n"
            f"<authenticator>{authenticator}</authenticator>\n"
            "<project_preferences>\n</project_preferences>\n</account>\n"
        )

    def sched_files(self) -> str:
        """The last scheduler request and reply the client kept, for diagnostics (§4.1)."""
        texts = []
        for pattern in ("sched_request_*.xml", "sched_reply_*.xml"):
            for path in sorted(self.path.glob(pattern)):
                texts.append(f"--- {path.name}\n{path.read_text(errors='replace')}")
        return "\n".join(texts)


def client_command(
    client_dir: ClientDir,
    authenticator: str | None,
    *,
    gui_rpc_port: int,
    exit_when_idle: bool = True,
    fetch_minimal_work: bool = True,
    extra: Iterable[str] = (),
) -> list[str]:
    command = [
        client_binary() or "boinc",
        "--dir",
        str(client_dir.path),
        "--gui_rpc_port",
        str(gui_rpc_port),
        "--no_info_fetch",
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--no_priority_change",
        "--sched_retry_delay_min",
        "1",
        "--sched_retry_delay_max",
        "10",
        "--pers_retry_delay_min",
        "1",
        "--pers_retry_delay_max",
        "10",
    ]
    if exit_when_idle:
        command.append("--exit_when_idle")
    if fetch_minimal_work:
        command.append("--fetch_minimal_work")
    command.extend(extra)
    if authenticator is not None:  # None: the projects are attached by their account files
        command.extend(["--attach_project", client_dir.master_url, authenticator])
    return command


def start_client(command: list[str], log_path: str | os.PathLike[str] | None = None) -> subprocess.Popen[bytes]:
    """Start the client in its own session; its output goes to ``log_path`` (or ours)."""
    if log_path is None:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


# Seconds a client asked to quit gets to exit before its process group is killed (§11 step 6).
QUIT_WAIT = 10


def quit_client(process: subprocess.Popen[bytes], gui_rpc_port: int, *, wait: float | None = None) -> bool:
    """Ask a running client to quit (``boinccmd --quit``) and wait up to ``wait`` seconds
    (QUIT_WAIT) for it to exit; True if it did. Its applications may outlive it: follow with
    ``stop_client``."""
    if process.poll() is not None:
        return True
    boinccmd(gui_rpc_port, "--quit")
    try:
        process.wait(timeout=QUIT_WAIT if wait is None else wait)
    except subprocess.TimeoutExpired:
        return False
    return True


def stop_client(process: subprocess.Popen[bytes]) -> None:
    """Kill the client's whole process group (the client and its applications)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)
    else:
        # The client has exited; its applications may linger in the group.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def boinccmd(gui_rpc_port: int, *args: str, timeout: float = 10) -> str:
    """Run ``boinccmd`` against the client; returns its output (errors included)."""
    command = [
        shutil.which("boinccmd") or "boinccmd",
        "--host",
        f"127.0.0.1:{gui_rpc_port}",
        "--passwd",
        GUI_RPC_PASSWORD,
        *args,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"boinccmd failed: {exc}"
    return done.stdout + done.stderr


def wait_for(
    process: subprocess.Popen[bytes],
    seconds: float,
    *,
    poll: float = 0.5,
    until: Callable[[], object] | None = None,
) -> bool:
    """Wait until ``process`` exits or ``until()`` is true; False on timeout."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None or (until is not None and until()):
            return True
        time.sleep(poll)
    return False
