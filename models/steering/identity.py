"""Who ran a command, for the approval and resume records: the real uid's account, which the caller
cannot choose, and beside it the sudo user the environment names, marked as a claim ($SUDO_USER,
like $USER and $LOGNAME that `getpass.getuser` reads first, is whatever the caller exported)."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass


@dataclass(frozen=True)
class Operator:
    account: str  # the real uid's name (or "uid N" where the uid has no passwd entry)
    claimed: str | None = None  # $SUDO_USER when set and another name

    def __str__(self) -> str:
        return self.account + (f" (sudo user {self.claimed}, as the environment claims)" if self.claimed else "")


def current_operator() -> Operator:
    """The real uid's account, and $SUDO_USER beside it when it names someone else."""
    uid = os.getuid()
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        account = f"uid {uid}"
    claimed = (os.environ.get("SUDO_USER") or "").strip() or None
    return Operator(account, claimed if claimed != account else None)


def describe(approved_by: str, claimed_by: str | None) -> str:
    """An approval's who, as recorded."""
    return str(Operator(approved_by, claimed_by))
