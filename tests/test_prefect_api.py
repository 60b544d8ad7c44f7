"""The Prefect API of batch commands (flows/prefect_api.py): a configured server is used as is; the
temporary one starts with a generous limit and a retry, fails with one clear message, is stopped
when the command ends and dies with it even on `kill -9`; an ingest succeeds on a saturated
machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metapilot.cli import app
from metapilot.flows import prefect_api as pa

REPO = Path(__file__).resolve().parents[1]
POZIDRIV = REPO / "samples" / "logs" / "slurm" / "pozidriv.log.gz"

# a stand-in for the API: answers /api/health on the port given as argv[1]
FAKE_API = textwrap.dedent("""
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *a):
            pass

    HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")
NEVER_READY = [sys.executable, "-c", "import time; time.sleep(600)"]


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries METAPILOT_TEST_TAG=tag (a command and its children)."""
    out = []
    needle = f"METAPILOT_TEST_TAG={tag}".encode()
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in env.read_bytes().split(b"\0") and alive(int(env.parent.name)):
                out.append(int(env.parent.name))
        except OSError:
            continue
    return out


def wait_until(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.fixture
def no_api_url(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(pa, "configured_api_url", lambda: None)


def test_the_start_limit_is_generous(monkeypatch):
    monkeypatch.delenv("METAPILOT_PREFECT_START_TIMEOUT_S", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", raising=False)
    assert pa.start_timeout_s() >= 120  # Prefect's own: 20 s
    monkeypatch.setenv("METAPILOT_PREFECT_START_TIMEOUT_S", "600")
    assert pa.start_timeout_s() == 600


def spawned_pids(server) -> list[int]:
    """The pid of every process the server spawns, in order (to check none is left behind)."""
    pids: list[int] = []
    real_spawn = server._spawn

    def spawn():
        real_spawn()
        pids.append(server.process.pid)

    server._spawn = spawn
    return pids


def test_a_slow_start_is_retried_and_the_first_try_is_stopped():
    spawned = []

    def command(port: int) -> list[str]:
        spawned.append(port)
        return NEVER_READY if len(spawned) == 1 else [sys.executable, "-c", FAKE_API, str(port)]

    said = []
    server = pa.TemporaryPrefectServer(timeout_s=3, attempts=2, command=command)
    first = spawned_pids(server)
    try:
        url = server.start(log=said.append)
        assert url == f"http://127.0.0.1:{spawned[1]}/api" and pa._healthy(url)
        assert len(spawned) == 2 and "trying once more" in said[0]
        assert not alive(first[0])  # the first, silent, try is not left behind
    finally:
        server.stop()
    assert not alive(first[1])
    assert not Path(server._log.name).exists()  # a clean stop leaves no log in the temporary folder


def test_a_failed_start_is_one_message_and_leaves_nothing(capsys):
    server = pa.TemporaryPrefectServer(timeout_s=1, attempts=2, command=lambda port: NEVER_READY)
    pids = spawned_pids(server)
    with pytest.raises(pa.PrefectStartError) as e:
        server.start(log=lambda m: None)
    assert "METAPILOT_PREFECT_START_TIMEOUT_S" in str(e.value) and "PREFECT_API_URL" in str(e.value)
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    log = Path(server._log.name)
    assert str(log) in str(e.value) and log.exists()  # the log the error names is kept
    log.unlink()


@pytest.fixture
def fake_server():
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/api"
    httpd.shutdown()


def test_a_configured_server_is_used_and_nothing_is_started(monkeypatch, fake_server):
    monkeypatch.setenv("PREFECT_API_URL", fake_server)
    monkeypatch.setattr(pa.TemporaryPrefectServer, "start", lambda *a, **k: pytest.fail("started a temporary API"))
    with pa.prefect_api() as url:
        assert url == fake_server


def test_an_unreachable_configured_server_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    with pytest.raises(pa.PrefectStartError, match="does not answer"):
        with pa.prefect_api():
            pass
    r = CliRunner().invoke(app, ["ingest", str(POZIDRIV), "--db", str(tmp_path / "m.duckdb")])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: the Prefect server at PREFECT_API_URL=http://127.0.0.1:9/api does not answer")
    assert "Traceback" not in r.output and len([ln for ln in lines if ln.startswith("error")]) == 1


KEEP_API = textwrap.dedent("""
    import os, sys, time
    from metapilot.flows.prefect_api import prefect_api

    with prefect_api() as url:
        print("api", url, flush=True)
        time.sleep(600)
""")


def test_kill_9_of_the_command_takes_the_temporary_api_down(tmp_path):
    # TMPDIR: the API's log, which a killed command leaves, stays in the test's folder
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-c", KEEP_API], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("api http://127.0.0.1:"), line + p.stdout.read()
        servers = children(p.pid)
        assert servers, "no server process under the command"
        assert pa._healthy(line.split()[1])
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        assert wait_until(lambda: not any(alive(s) for s in servers), 30), "the temporary API outlived kill -9"
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.whole_machine  # its busy processes would slow the other xdist worker's tests too
def test_an_ingest_succeeds_with_every_core_saturated(tmp_path):
    """The issue's failure: Prefect's 20 s start limit on a busy machine. Twice as many busy
    processes as cores, then a real `metapilot ingest --flow` (temporary API included)."""
    tag = f"saturated-{os.getpid()}-{time.time_ns()}"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"METAPILOT_TEST_TAG": tag}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 2))]
    try:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "metapilot.cli", "ingest", str(POZIDRIV), "--flow", "--db",
                              str(tmp_path / "m.duckdb")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        out, _ = p.communicate(timeout=600)
        took = time.monotonic() - t0
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert p.returncode == 0, out
    assert "pozidriv.log.gz" in out and "11,704" in out, out
    assert wait_until(lambda: not tagged(tag), 10), "the temporary API outlived the command"
    print(f"ingest with {len(busy)} busy processes on {os.cpu_count()} cores: {took:.1f} s")


def test_a_temporary_api_that_does_not_start_is_one_line_from_the_command(tmp_path, monkeypatch, no_api_url):
    tag = f"nostart-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("METAPILOT_TEST_TAG", tag)
    monkeypatch.setenv("METAPILOT_PREFECT_START_TIMEOUT_S", "0.2")  # no real server starts that fast
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the log a failed start keeps stays here
    r = CliRunner().invoke(app, ["ingest", str(POZIDRIV), "--flow", "--db", str(tmp_path / "m.duckdb")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("created the site key")]
    assert lines[0].startswith("the temporary Prefect API did not answer within 1 s") and "trying once more" in lines[0]
    assert lines[1].startswith("error: the temporary Prefect API did not start within 1 s (2 tries")
    assert len(lines) == 2 and "Traceback" not in r.output
    kept = list(tmp_path.glob("metapilot-prefect-api-*.log"))
    assert len(kept) == 1 and kept[0].name in lines[1]  # the log the error names is there to read
    assert wait_until(lambda: not tagged(tag), 10), "a server of a failed start was left behind"


def test_a_plain_ingest_starts_no_api_and_imports_no_prefect(tmp_path, monkeypatch, no_api_url):
    """Without a configured server `metapilot ingest` runs the ingest directly (issue 14): no
    temporary API, no Prefect import; the same reports as the flow."""
    monkeypatch.chdir(tmp_path)  # no .env / prefect.toml here
    monkeypatch.setattr(pa.TemporaryPrefectServer, "start", lambda *a, **k: pytest.fail("started a temporary API"))
    assert not pa.api_configured()
    code = ("import sys; from metapilot.cli import app; sys.argv = ['metapilot', 'ingest', sys.argv[1], '--db', sys.argv[2]]\n"
            "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'prefect' not in sys.modules, 'prefect was imported'")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # no profile that names a server
    p = subprocess.run([sys.executable, "-c", code, str(POZIDRIV), str(tmp_path / "m.duckdb")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "pozidriv.log.gz" in p.stdout and "11,704" in p.stdout
