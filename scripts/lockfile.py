"""requirements.lock against an environment (standard library only; run it with the environment's python).

    python scripts/lockfile.py block torch requirements.lock   # the lock's lines for one package
    python scripts/lockfile.py extra requirements.lock         # installed, not in the lock (to remove)
    python scripts/lockfile.py check requirements.lock         # exit 1 unless installed == lock
    python scripts/lockfile.py diff requirements.lock          # installed versions that differ from the lock

"Installed" is what importlib.metadata finds in the running interpreter's environment, the same
distributions `pip freeze` lists; the project itself (metapilot) and pip are not in the lock."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

NOT_LOCKED = {"metapilot", "pip"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, str]:
    """{canonical name: version} of every `name==version` line of a pip-compile output."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            out[canonical(m.group(1))] = m.group(2)
    return out


def block(text: str, name: str) -> str:
    """The requirement line of `name` with its --hash continuation lines, as a requirements file."""
    lines, keep = [], False
    for line in text.splitlines():
        if not keep and re.match(rf"^{re.escape(name)}==", line, re.I):
            keep = True
        if keep:
            lines.append(line)
            if not line.rstrip().endswith("\\"):
                break
    if not lines:
        raise SystemExit(f"{name} is not in the lock")
    return "\n".join(lines) + "\n"


def installed() -> dict[str, str]:
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(canonical(name), dist.version)
    return out


def compare(lock: dict[str, str], have: dict[str, str]) -> dict[str, list]:
    """missing: locked, not installed; different: (name, locked, installed); extra: installed, not locked."""
    return {
        "missing": sorted(n for n in lock if n not in have),
        "different": sorted((n, v, have[n]) for n, v in lock.items() if n in have and have[n] != v),
        "extra": sorted(n for n in have if n not in lock and n not in NOT_LOCKED),
    }


def main(argv: list[str]) -> int:
    cmd, *rest = argv
    if cmd == "block":
        name, path = rest
        sys.stdout.write(block(Path(path).read_text(), name))
        return 0
    lock = parse_lock(Path(rest[0]).read_text())
    diff = compare(lock, installed())
    if cmd == "extra":
        print(" ".join(diff["extra"]))
        return 0
    if cmd == "diff":
        for name, locked, have in diff["different"]:
            print(f"{name:32s} {locked:>16s} -> {have}")
        for name in diff["extra"]:
            print(f"{name:32s} {'(not locked)':>16s} -> {installed()[name]}")
        for name in diff["missing"]:
            print(f"{name:32s} {lock[name]:>16s} -> (not installed)")
        return 0
    if cmd == "check":
        bad = any(diff.values())
        for key, items in diff.items():
            if items:
                print(f"{key}: {items}")
        print("installed != requirements.lock" if bad else f"installed == requirements.lock ({len(lock)} packages)")
        return 1 if bad else 0
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
