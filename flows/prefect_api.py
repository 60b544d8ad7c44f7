"""The Prefect API that batch commands run their flows against.

With `PREFECT_API_URL` set (environment or Prefect profile), flows report to that server: a real
Prefect server, whose work pool runs the scheduled deployments (README, `prefect.yaml`). Without
it, a temporary local API is started for the command, as Prefect's own ephemeral mode would, but:

- with a generous start limit (default 180 s, `METAPILOT_PREFECT_START_TIMEOUT_S`; Prefect's own
  is 20 s, too short on a busy machine) and one retry on a fresh port;
- never left behind: stopped when the command ends, and tied to the command's life with Linux's
  parent-death signal, so that even `kill -9` of the command takes it down;
- a failure is one `PrefectStartError` with what to do, not Prefect's 150-line traceback.

Importing this module does not import Prefect (the API must be chosen before Prefect reads its
settings).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from metapilot.ground.interrupt import at_hard_exit

START_TIMEOUT_S = 180.0
START_ATTEMPTS = 2


class PrefectStartError(RuntimeError):
    """No Prefect API could be reached or started; the message says what to do."""


def _stderr(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def start_timeout_s() -> float:
    """`METAPILOT_PREFECT_START_TIMEOUT_S`, else the larger of 180 s and Prefect's own setting."""
    env = os.environ.get("METAPILOT_PREFECT_START_TIMEOUT_S")
    if env:
        try:
            return max(1.0, float(env))
        except ValueError:
            raise PrefectStartError(f"METAPILOT_PREFECT_START_TIMEOUT_S={env!r} is not a number of seconds") from None
    try:
        prefect_own = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "0"))
    except ValueError:
        prefect_own = 0.0
    return max(START_TIMEOUT_S, prefect_own)


def configured_api_url() -> str | None:
    """The Prefect API the user chose (`PREFECT_API_URL` in the environment or the active Prefect
    profile), or None."""
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


def _prefect_settings_files() -> list[Path]:
    """Where Prefect may read settings from besides the environment: the profiles file, and
    `.env`, `prefect.toml` and `pyproject.toml` in the working directory."""
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    return [profiles, Path(".env"), Path("prefect.toml"), Path("pyproject.toml")]


def api_configured() -> bool:
    """Whether the user chose a Prefect API (`configured_api_url`), without importing Prefect
    (about a second) when no settings source can name one: no `PREFECT_API_URL` in the
    environment and no settings file that mentions Prefect's API."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if not os.environ.get("PREFECT_PROFILE"):
        for f in _prefect_settings_files():
            try:
                text = f.read_text(errors="replace")
            except OSError:
                continue
            if f.name == "pyproject.toml" and "tool.prefect" not in text:
                continue
            if "api" in text.lower():  # conservative: Prefect itself decides
                break
        else:
            return False
    return bool(configured_api_url())


def _healthy(api_url: str, timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """In the server's process: get SIGTERM when the command that started it dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def server_command(port: int) -> list[str]:
    """The temporary API: Prefect's server app under uvicorn, as Prefect's ephemeral mode runs it."""
    import prefect

    return [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent), "--factory",
            "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]


class TemporaryPrefectServer:
    """A local Prefect API for one command (see the module docstring)."""

    def __init__(self, timeout_s: float | None = None, attempts: int = START_ATTEMPTS,
                 command: Callable[[int], list[str]] | None = None) -> None:
        self.timeout_s = start_timeout_s() if timeout_s is None else timeout_s
        self.attempts = attempts
        self.command = command or server_command
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="metapilot-prefect-api-", suffix=".log", delete=False)
        self._answered = False  # the API answered: its log goes when it stops (`stop`, or a hard exit)
        self._forget_log: Callable[[], None] = lambda: None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _spawn(self) -> None:
        self.port = _free_port()
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        env.pop("PREFECT_API_URL", None)
        self.process = subprocess.Popen(self.command(self.port), env=env, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=self._log,
                                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def _wait_healthy(self, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            if _healthy(self.api_url, timeout=min(5.0, max(0.5, deadline - time.monotonic()))):
                return True
            time.sleep(0.25)
        return False

    def start(self, log: Callable[[str], None] | None = None, meanwhile: Callable[[], None] | None = None) -> str:
        """Start the API and wait until it answers; `meanwhile` runs once while it starts (work the
        command needs anyway, e.g. heavy imports: the start-up then costs less wall time)."""
        log = log or _stderr
        atexit.register(self.stop)
        for attempt in range(1, self.attempts + 1):
            self._spawn()
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            if self._wait_healthy(time.monotonic() + self.timeout_s):
                self._answered = True
                self._forget_log = at_hard_exit(self._drop_log)  # Ctrl-C's hard exit skips `stop`
                return self.api_url
            code = self.process.poll() if self.process else None
            self.stop()
            if attempt < self.attempts:
                log(f"the temporary Prefect API did not answer within {self.timeout_s:.0f} s"
                    f"{'' if code is None else f' (it exited with code {code})'}; trying once more")
        raise PrefectStartError(
            f"the temporary Prefect API did not start within {self.timeout_s:.0f} s ({self.attempts} tries; its log: "
            f"{self._log.name}): on a busy machine set METAPILOT_PREFECT_START_TIMEOUT_S=600, or run a Prefect "
            "server (`prefect server start`) and set PREFECT_API_URL=http://127.0.0.1:4200/api")

    def stop(self) -> None:
        """Stop the API. Its log goes with it once it has answered (an hourly command would otherwise
        leave a file in the temporary folder each run, and only a failed start names it); a start that
        failed keeps the log its error names."""
        p, self.process = self.process, None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self._answered:
            self._drop_log()
            self._forget_log()

    def _drop_log(self) -> None:
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)


def _drain_prefect_workers() -> None:
    """Send the logs and events still queued before the API goes away (else Prefect prints
    "Error logging to API" at exit)."""
    if "prefect" not in sys.modules:
        return
    for module, name in (("prefect.logging.handlers", "APILogWorker"), ("prefect.events.worker", "EventsWorker")):
        try:
            worker = getattr(__import__(module, fromlist=[name]), name)
            worker.drain_all(timeout=10)
        except Exception:  # noqa: BLE001 - best effort: a worker that never started has nothing queued
            pass


def _refresh_prefect_settings() -> None:
    if "prefect.context" in sys.modules:
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()


@contextmanager
def prefect_api(log: Callable[[str], None] | None = None, timeout_s: float | None = None,
                meanwhile: Callable[[], None] | None = None) -> Iterator[str]:
    """Run the body against a Prefect API: the configured server, else a temporary one that is
    stopped on the way out (`meanwhile` runs while it starts). Yields the API URL; raises
    PrefectStartError with what to do."""
    log = log or _stderr
    url = configured_api_url()
    if url:
        if not _healthy(url, timeout=10.0):
            raise PrefectStartError(
                f"the Prefect server at PREFECT_API_URL={url} does not answer: start it (`prefect server start`), "
                "or unset PREFECT_API_URL to run with a temporary local API")
        yield url
        return
    server = TemporaryPrefectServer(timeout_s=timeout_s)
    api = server.start(log, meanwhile)
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api
    _refresh_prefect_settings()
    try:
        yield api
    finally:
        _drain_prefect_workers()
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before
        _refresh_prefect_settings()
        server.stop()


class _OneLine(logging.Filter):
    """Console logs without tracebacks: a failure shows as one line (the CLI then says what to do)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or record.exc_text or record.stack_info:
            msg = record.getMessage().splitlines()
            record.msg, record.args = (msg[0] if msg else ""), ()
            record.exc_info = record.exc_text = record.stack_info = None
        elif isinstance(record.msg, str) and "\nTraceback (most recent call last)" in record.getMessage():
            record.msg, record.args = record.getMessage().split("\nTraceback", 1)[0], ()
        return True


class _NoFailureEcho(logging.Filter):
    """Console logs without Prefect's echo of a run's failure ("Task run failed with exception",
    "Encountered exception during execution", "Finished in state Failed", ...: four lines for one
    error, issue 37): the command says it once, in its own words. The server keeps them."""

    RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
    ECHOES = ("Task run failed with exception", "Encountered exception during execution", "Finished in state Failed",
              "Finished in state Crashed", "Task run encountered an exception")

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.RUN_LOGGERS):
            return True
        return not record.getMessage().startswith(self.ECHOES)  # MetaPilot's own log lines stay


def quiet_prefect_tracebacks() -> None:
    """Keep Prefect's console output to the command's own: no tracebacks (they come with --debug),
    and no echo of a failure the command then reports in one line."""
    import prefect.main  # noqa: F401 - configures Prefect's logging (its console handler) first
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers + logging.getLogger("prefect").handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(isinstance(f, _OneLine) for f in handler.filters):
            handler.addFilter(_OneLine())
            handler.addFilter(_NoFailureEcho())
