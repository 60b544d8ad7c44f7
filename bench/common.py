"""What every benchmark shares: the machine's description and writing its section of
docs/benchmarks.md (other sections are kept)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
SHARED = (REPO / ".." / "shared" / "data").resolve()
CLI = str(REPO / ".venv" / "bin" / "metapilot")


def machine() -> str:
    """CPU model (lscpu), core count, Python version."""
    model = platform.processor() or "unknown CPU"
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"Model name:\s*(.+)", info)
        model = m.group(1).strip() if m else model
    except (OSError, subprocess.CalledProcessError):
        pass
    return f"{model}, {os.cpu_count()} cores (shared), Python {platform.python_version()}"


def write_section(heading: str, text: str, doc: Path = DOC) -> None:
    """Replace (or append) the `## heading` section of the benchmarks document with `text` (which
    starts with that heading line)."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    old = doc.read_text() if doc.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    body = text.rstrip("\n") + "\n\n"
    new = pattern.sub(lambda _: body, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + body
    doc.write_text(new.rstrip("\n") + "\n")


def timed(args: list[str], repeat: int) -> list[float]:
    """Wall seconds of `metapilot ARGS` as new processes, as a user runs it (the first, untimed, warms the OS
    and numba caches)."""
    out = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        p = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=REPO)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"metapilot {' '.join(args)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        if i:
            out.append(wall)
    return out
