"""BOINC's server programs, and boincweb's, set up for the bench scripts that run them.

Shared by ``bench/server_differential.py`` (one step on random cases, field by field) and
``bench/server_vs_boinc.py`` (the whole pipeline, results per second):

- ``Project``: a throwaway BOINC project folder over a built BOINC server (``BOINC_SERVER``:
  the source tree, or a folder holding its programs) and a MariaDB database made from BOINC's
  db/schema.sql: config.xml, keys made with lib/crypt_prog, templates, and its programs run
  from cgi-bin/ (daemons with ``--one_pass``, ``sched/cgi`` answering one request on standard
  input once ``sched/feeder`` has filled shared memory), each under ``faketime`` when given a
  clock;
- ``scheduler_request_xml`` and ``parse_reply``: a scheduler request body as a client sends it
  (reference/protocol.md §4.2) and the parts of a reply (§4.3) the benches read, the same for
  both servers;
- ``setup_boincweb``: Django on a given database, with the upload and download directories in
  the bench's folder.

Nothing of BOINC is copied here: its programs are run as they are built.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLATFORM = "x86_64-pc-linux-gnu"
APP = "uppercase"
# the programs a bench may ask for: name -> file name in the built tree
PROGRAM_FILES = {
    "transitioner": "transitioner",
    "validator": "sample_bitwise_validator",
    "assimilator": "sample_dummy_assimilator",
    "file_deleter": "file_deleter",
    "scheduler": "cgi",
    "feeder": "feeder",
    "crypt_prog": "crypt_prog",
    "create_work": "create_work",
    "file_upload_handler": "file_upload_handler",
}
# What each daemon is told besides --one_pass: the app, and for the validator credit from the
# workunit's estimate (boincweb's credit rule, validator.py credit_for).
DAEMON_ARGS = {"validator": ["--app", APP, "--credit_from_wu"], "assimilator": ["--app", APP]}

HOWTO = """\
BOINC_SERVER is not set: it must name a BOINC source tree with the server built (or a folder
holding its programs). To build one, outside this repository:

  apt-get install autoconf automake libtool pkg-config libmariadb-dev libmariadb-dev-compat \\
      libssl-dev libcurl4-openssl-dev nlohmann-json3-dev faketime
  git clone https://github.com/BOINC/boinc && cd boinc
  ./_autosetup
  ./configure --disable-client --disable-manager --enable-server --disable-fcgi
  echo '#define SVN_VERSION "local"' > svn_version.h
  for d in lib db tools sched; do make -C $d; done

then run  BOINC_SERVER=$PWD python {script}
(MariaDB on BOINC_DB_HOST, 127.0.0.1 by default, user root without a password).
"""


def howto(script):
    return HOWTO.replace("{script}", script)


# --- files and SQL --------------------------------------------------------------------------


def find_program(server, name):
    for folder in (server, server / "sched", server / "lib", server / "tools"):
        if (folder / name).is_file() and os.access(folder / name, os.X_OK):
            return folder / name
    raise SystemExit(f"BOINC_SERVER={server} has no built {name}; see --help")


def find_source(server, name):
    for path in (server / "db" / name, server / name):
        if path.is_file():
            return path
    raise SystemExit(f"BOINC_SERVER={server} has no db/{name}")


def sql_statements(path):
    text = "\n".join(
        line for line in path.read_text().splitlines() if not line.strip().startswith("--") and not line.startswith("#")
    )
    return [s.strip() for s in text.split(";") if s.strip()]


def faketime_library():
    for path in (
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ):
        if Path(path).exists():
            return path
    raise SystemExit("faketime is not installed (apt-get install faketime)")


def time_text(now):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))


def sql_value(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


def insert(table, row):
    return f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(sql_value(v) for v in row.values())})"


def insert_many(table, rows):
    """One multi-row INSERT of ``rows`` (dicts with the same keys)."""
    columns = list(rows[0])
    values = ", ".join("(" + ", ".join(sql_value(row[c]) for c in columns) + ")" for row in rows)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values}"


def app_version_xml(version_num):
    """An app version's xml_doc: one signed executable (the signature is never checked by
    the server)."""
    name = f"{APP}_{version_num}"
    return (
        f"<file_info>\n<name>{name}</name>\n<url>http://localhost/p/download/{name}</url>\n"
        "<executable/>\n<file_signature>\nx\n</file_signature>\n<nbytes>10</nbytes>\n"
        f"</file_info>\n<app_version>\n<app_name>{APP}</app_name>\n"
        f"<version_num>{version_num}</version_num>\n<file_ref>\n"
        f"<file_name>{name}</file_name>\n<main_program/>\n</file_ref>\n</app_version>\n"
    )


# --- a BOINC project ------------------------------------------------------------------------


class Project:
    """A throwaway BOINC project folder under ``work`` and MariaDB database ``db``."""

    returncode = 0  # the exit status of the last program run or schedule call

    def __init__(self, server, db, host, work, programs):
        import pymysql

        # absolute: BOINC's programs run from cgi-bin/ and read the paths config.xml names
        self.server, self.db, self.db_host = Path(server).resolve(), db, host
        self.work = work = Path(work).resolve()
        self.programs = {k: find_program(self.server, PROGRAM_FILES[k]) for k in {*programs, "crypt_prog"}}
        self.project = work / "boinc_project"
        shutil.rmtree(self.project, ignore_errors=True)
        for sub in ("cgi-bin", "upload", "download", "keys", "templates"):
            (self.project / sub).mkdir(parents=True)
        for key in ("upload", "code_sign"):
            subprocess.run(
                [
                    self.programs["crypt_prog"],
                    "-genkey",
                    "1024",
                    self.project / "keys" / f"{key}_private",
                    self.project / "keys" / f"{key}_public",
                ],
                check=True,
                capture_output=True,
            )
        (self.project / "templates" / "out").write_text(
            "<output_template>\n<file_info>\n<name><OUTFILE_0/></name>\n<generated_locally/>\n"
            "<upload_when_present/>\n<max_nbytes>10000000</max_nbytes>\n"
            "<url><UPLOAD_URL/></url>\n</file_info>\n<result>\n<file_ref>\n"
            "<file_name><OUTFILE_0/></file_name>\n<open_name>out</open_name>\n</file_ref>\n"
            "</result>\n</output_template>\n"
        )
        (self.project / "templates" / "in").write_text(
            "<input_template>\n<file_info>\n<number>0</number>\n</file_info>\n<workunit>\n"
            "<file_ref>\n<file_number>0</file_number>\n<open_name>in</open_name>\n"
            "</file_ref>\n</workunit>\n</input_template>\n"
        )
        self.shmem_key = f"0x{0x1F00000 + os.getpid() % 0xFFFF:x}"
        self.connection = pymysql.connect(host=host, user="root", password="", autocommit=True)
        with self.connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{db}`")
            cursor.execute(f"CREATE DATABASE `{db}`")
            cursor.execute(f"USE `{db}`")
            for name in ("schema.sql", "constraints.sql"):
                for statement in sql_statements(find_source(self.server, name)):
                    cursor.execute(statement)

    @property
    def upload_dir(self):
        return self.project / "upload"

    @property
    def download_dir(self):
        return self.project / "download"

    def write_config(self, options, flags=(), long_name="bench"):
        """config.xml: the project's folders, database and keys, ``options`` (name -> value)
        and ``flags`` (names of options set by their presence). The upload and download
        directories are flat (uldl_dir_fanout 0), as boincweb's."""
        text = "".join(f"<{k}>{v}</{k}>\n" for k, v in options.items())
        text += "".join(f"<{flag}/>\n" for flag in flags)
        (self.project / "config.xml").write_text(
            f"<boinc>\n<config>\n<db_name>{self.db}</db_name>\n<db_host>{self.db_host}</db_host>\n"
            "<db_user>root</db_user>\n<db_passwd></db_passwd>\n"
            f"<upload_dir>{self.project}/upload</upload_dir>\n"
            f"<download_dir>{self.project}/download</download_dir>\n"
            f"<key_dir>{self.project}/keys</key_dir>\n<shmem_key>{self.shmem_key}</shmem_key>\n"
            "<uldl_dir_fanout>0</uldl_dir_fanout>\n<master_url>http://localhost/p/</master_url>\n"
            f"<long_name>{long_name}</long_name>\n"
            "<upload_url>http://localhost/p/upload</upload_url>\n"
            "<download_url>http://localhost/p/download</download_url>\n"
            f"{text}</config>\n</boinc>\n"
        )

    def execute(self, statements):
        with self.connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_mode = ''")
            for s in statements:
                cursor.execute(s)

    def query(self, sql):
        with self.connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    def env(self, clock):
        """The environment of a program run at ``clock``: an absolute Unix time (an int), an
        offset from the real clock ("+3"), or None for the real clock."""
        if clock is None:
            return dict(os.environ, TZ="UTC")
        fake = f"@{time_text(clock)}" if isinstance(clock, int) else clock
        return dict(os.environ, FAKETIME=fake, TZ="UTC", LD_PRELOAD=faketime_library(), FAKETIME_DONT_RESET="1")

    def run(self, name, *args, clock=None, stdin=None, cwd=None, timeout=600):
        """Run program ``name`` from cgi-bin/ (or ``cwd``); returns its stdout and stderr.
        Its exit status is kept in ``returncode`` (negative: killed by that signal)."""
        out = subprocess.run(
            [self.programs[name], *args],
            cwd=cwd or self.project / "cgi-bin",
            env=self.env(clock),
            input=stdin,
            capture_output=True,
            timeout=timeout,
        )
        self.returncode = out.returncode
        return out.stdout.decode(errors="replace") + out.stderr.decode(errors="replace")

    def daemon(self, step, clock=None):
        """One ``--one_pass`` of the daemon for ``step``; returns its output."""
        return self.run(step, "--one_pass", *DAEMON_ARGS.get(step, ()), clock=clock)

    @contextmanager
    def feeder(self, clock=None, args=("--allapps", "--priority_order")):
        """sched/feeder running in the background, once it has filled shared memory."""
        process = subprocess.Popen(
            [self.programs["feeder"], *args, "-d", "4"],
            cwd=self.project / "cgi-bin",
            env=self.env(clock),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_feeder(process)
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            # the feeder leaves its shared memory behind
            subprocess.run(["ipcrm", "-M", self.shmem_key], capture_output=True)

    def schedule(self, body, clock=None):
        """sched/cgi's reply to one request body (the feeder must be running)."""
        out = subprocess.run(
            [self.programs["scheduler"]],
            cwd=self.project / "cgi-bin",
            env=self.env(clock),
            input=body.encode(),
            capture_output=True,
            timeout=60,
        )
        self.returncode = out.returncode
        return out.stdout.decode(errors="replace")


def wait_for_feeder(feeder, timeout=120):
    """Until the feeder has filled shared memory: its second scan finds nothing to add and it
    says it is sleeping (the ready flag is set after the first)."""
    deadline = time.time() + timeout
    for line in iter(feeder.stdout.readline, b""):
        if b"sleeping" in line:
            break
        if time.time() > deadline:
            raise SystemExit("BOINC's feeder did not fill shared memory")
    # keep draining its output so it never blocks on a full pipe
    threading.Thread(target=lambda: feeder.stdout.read(), daemon=True).start()


# --- the wire -------------------------------------------------------------------------------


def scheduler_request_xml(
    *,
    authenticator,
    hostid,
    req_secs,
    req_instances,
    estimated_delay,
    host,
    reports=(),
    other_results=None,
    rpc_seqno=5,
):
    """A scheduler request body (reference/protocol.md §4.2).

    ``host``: p_ncpus, p_fpops, m_nbytes, on_frac, active_frac (and optionally domain_name,
    os_name, p_vendor and p_model).
    ``reports``: dicts with name, state, exit_status and optionally ``files``, a list of
    (name, nbytes, md5) of outputs already uploaded. ``other_results``: the names of the jobs
    still on board, or None to leave the list out.
    """
    domain = host.get("domain_name", f"host{hostid}")
    lines = [
        "<scheduler_request>",
        f"<authenticator>{authenticator}</authenticator>",
        f"<hostid>{hostid}</hostid>",
        f"<rpc_seqno>{rpc_seqno}</rpc_seqno>",
        "<core_client_major_version>8</core_client_major_version>",
        "<core_client_minor_version>0</core_client_minor_version>",
        "<core_client_release>2</core_client_release>",
        f"<platform_name>{PLATFORM}</platform_name>",
        f"<work_req_seconds>{req_secs}</work_req_seconds>",
        f"<cpu_req_secs>{req_secs}</cpu_req_secs>",
        f"<cpu_req_instances>{req_instances}</cpu_req_instances>",
        f"<estimated_delay>{estimated_delay}</estimated_delay>",
        "<global_preferences><disk_max_used_gb>100</disk_max_used_gb>"
        "<disk_max_used_pct>90</disk_max_used_pct><disk_min_free_gb>0</disk_min_free_gb>"
        "</global_preferences>",
        "<time_stats>",
        f"<on_frac>{host['on_frac']}</on_frac>",
        "<connected_frac>1</connected_frac>",
        "<cpu_and_network_available_frac>1</cpu_and_network_available_frac>",
        f"<active_frac>{host['active_frac']}</active_frac>",
        "<gpu_active_frac>1</gpu_active_frac>",
        "</time_stats>",
        "<host_info>",
        f"<domain_name>{domain}</domain_name>",
        f"<host_cpid>cpid{hostid}</host_cpid>",
        f"<p_vendor>{host.get('p_vendor', 'GenuineIntel')}</p_vendor>",
        f"<p_model>{host.get('p_model', 'Xeon')}</p_model>",
        f"<p_ncpus>{host['p_ncpus']}</p_ncpus>",
        f"<p_fpops>{host['p_fpops']}</p_fpops>",
        "<p_iops>1e9</p_iops>",
        f"<m_nbytes>{host['m_nbytes']}</m_nbytes>",
        "<d_total>1e12</d_total>",
        "<d_free>5e11</d_free>",
        f"<os_name>{host.get('os_name', 'Linux')}</os_name>",
        "<os_version>6.1</os_version>",
        "</host_info>",
    ]
    for report in reports:
        lines += [
            "<result>",
            f"<name>{report['name']}</name>",
            f"<state>{report['state']}</state>",
            f"<exit_status>{report['exit_status']}</exit_status>",
            "<final_cpu_time>100</final_cpu_time>",
            "<final_elapsed_time>120</final_elapsed_time>",
            "<app_version_num>100</app_version_num>",
        ]
        for name, nbytes, md5 in report.get("files", ()):
            lines += [
                "<file_info>",
                f"<name>{name}</name>",
                f"<nbytes>{nbytes}</nbytes>",
                "<max_nbytes>10000000</max_nbytes>",
                f"<md5_cksum>{md5}</md5_cksum>",
                "</file_info>",
            ]
        lines.append("</result>")
    if other_results is not None:
        lines.append("<other_results>")
        lines += [f"<other_result><name>{n}</name></other_result>" for n in other_results]
        lines.append("</other_results>")
    lines.append("</scheduler_request>")
    return "\n".join(lines) + "\n"


def upload_request(name, data, *, max_nbytes, xml_signature):
    """An upload of a whole output file as a client sends it to the file upload handler
    (reference/protocol.md §5.2): the ``<data_server_request>`` header with the file's
    ``<file_info>`` as the scheduler's reply gave it (its name, size limit and upload
    certificate), its size, MD5 and offset 0, then ``<data>`` and the bytes."""
    header = (
        "<data_server_request>\n"
        "<core_client_major_version>8</core_client_major_version>\n"
        "<core_client_minor_version>0</core_client_minor_version>\n"
        "<core_client_release>2</core_client_release>\n"
        "<file_upload>\n<file_info>\n"
        f"<name>{name}</name>\n<max_nbytes>{max_nbytes}</max_nbytes>\n"
        + (f"<xml_signature>\n{xml_signature}\n</xml_signature>\n" if xml_signature else "")
        + "</file_info>\n"
        f"<nbytes>{len(data)}</nbytes>\n<md5_cksum>{hashlib.md5(data).hexdigest()}</md5_cksum>\n"
        "<offset>0</offset>\n<data>\n"
    )
    return header.encode() + data


def upload_status(reply):
    """The ``<status>`` of a file upload handler's reply (0 is success), or None."""
    start = reply.find("<status>")
    if start < 0:
        return None
    return int(reply[start + 8 : reply.find("</status>", start)].strip())


def file_infos(text):
    """Each ``<file_info>`` of a scheduler reply by name: its max_nbytes and upload
    certificate (``xml_signature``), what the client sends back with the file's upload."""
    start = text.find("<scheduler_reply")
    end = text.rfind("</scheduler_reply>")
    if start < 0 or end < 0:
        return {}
    root = ET.fromstring(text[start : end + len("</scheduler_reply>")])
    return {
        f.findtext("name"): dict(
            max_nbytes=f.findtext("max_nbytes") or "", xml_signature=(f.findtext("xml_signature") or "").strip()
        )
        for f in root.findall("file_info")
    }


def parse_reply(text):
    """The parts of a scheduler reply the benches read: ``jobs``, a list of dicts (name,
    wu_name, report_deadline, outputs: the file names the result uploads), request_delay,
    the message kinds, the messages as sorted (priority, text) pairs (``message_texts``), the
    acks and the files the host is told to delete; ``{"error": ...}`` for a reply that is not
    one."""
    start = text.find("<scheduler_reply")
    if start < 0:
        return {"error": text[-500:]}
    try:
        root = ET.fromstring(
            text[start : text.rfind("</scheduler_reply>") + 18] if "</scheduler_reply>" in text else text[start:]
        )
    except ET.ParseError as error:
        return {"error": f"unparsable reply: {error}"}
    jobs = [
        dict(
            name=r.findtext("name"),
            wu_name=r.findtext("wu_name"),
            report_deadline=int(float(r.findtext("report_deadline") or 0)),
            outputs=[f.findtext("file_name") for f in r.findall("file_ref")],
        )
        for r in root.findall("result")
    ]
    return dict(
        jobs=jobs,
        request_delay=float(root.findtext("request_delay") or 0),
        messages=sorted({m.get("priority", "") for m in root.findall("message")}),
        message_texts=sorted({(m.get("priority", ""), (m.text or "").strip()) for m in root.findall("message")}),
        acks=sorted(a.findtext("name") for a in root.findall("result_ack")),
        deletes=sorted(d.text.strip() for d in root.findall("delete_file_info")),
    )


# --- boincweb -------------------------------------------------------------------------------


def setup_boincweb(work, database_url=None):
    """Django on ``database_url`` (a SQLite file in ``work`` when None, made afresh), its
    upload, download and data directories in ``work``, migrated."""
    if database_url is None:
        (work / "boincweb.sqlite3").unlink(missing_ok=True)
        database_url = f"sqlite:///{work / 'boincweb.sqlite3'}"
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.UPLOAD_DIR = work / "boincweb_upload"
    settings.DOWNLOAD_DIR = work / "boincweb_download"
    settings.BOINCWEB_DATA_DIR = work / "boincweb_data"
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return database_url
