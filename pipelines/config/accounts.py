"""The unprivileged OS users the services run as when `make up` runs as root (as CI
does): PostgreSQL refuses root, and the SQL service must not be able to write the lake.
Run by anyone else, every service runs as that user (docs/deploy.md says what that gives up)."""
from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from pathlib import Path


def is_root() -> bool:
    return os.geteuid() == 0


def service_user(preferred: tuple[str, ...], create: str) -> str:
    """As root: the first existing user of `preferred`, else a new system user `create`
    (no home, no login shell). As anyone else: "" (the caller)."""
    if not is_root():
        return ""
    for name in preferred:
        if _exists(name):
            return name
    if not _exists(create):
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        proc = subprocess.run([useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", create], capture_output=True, text=True)
        if proc.returncode != 0 and not _exists(create):  # (another `up` may have just created it)
            raise RuntimeError(f"could not create the system user {create!r} for the services: "
                               f"{proc.stderr.strip() or proc.stdout.strip()}")
    return create


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def as_user(cmd: list[str], user: str) -> list[str]:
    """`cmd` run as `user` (through runuser, which needs root), or as the caller."""
    if user and is_root():
        return [shutil.which("runuser") or "/usr/sbin/runuser", "-u", user, "--", *cmd]
    return cmd


def popen_user(user: str) -> dict:
    """subprocess keyword arguments that start a child as `user` (none for the caller)."""
    if not (user and is_root()):
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def give(path: Path, user: str, mode: int) -> None:
    """Make `path` belong to `user` (as root) with `mode`."""
    if user and is_root():
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(path, mode)


def write_private(path: Path, text: str, owner: str = "") -> None:
    """Write `text` to `path` readable by its owner only (0600 from creation: the text is a
    secret), atomically (a reader sees the old file or the new one), owned by `owner`
    when given (see `give`)."""
    tmp = Path(path).with_suffix(".partial")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    if owner:
        give(tmp, owner, mode=0o600)
    tmp.replace(path)


def can_reach(path: Path, user: str) -> Path | None:
    """The first directory on the way to `path` that `user` may not enter (None: all can
    be), judged from the mode bits, owner and group."""
    if not (user and is_root()):
        return None
    entry = pwd.getpwnam(user)
    groups = {g.gr_gid for g in grp.getgrall() if user in g.gr_mem} | {entry.pw_gid}
    for directory in [*reversed(path.resolve().parents)]:
        st = directory.stat()
        if st.st_uid == entry.pw_uid:
            ok = st.st_mode & 0o100
        elif st.st_gid in groups:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return directory
    return None
