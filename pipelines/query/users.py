"""The SQL server's users: a password file of salted PBKDF2 hashes, one `name:hash` line
each, readable by its owner only. perflake.gate.PasswordFile checks logins against it;
with no users the server accepts anyone and listens on loopback only (docs/security.md)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from pipelines.config.lake import Lake, safe_name
from pipelines.query.files import password_file

HASH_ITERATIONS = 200_000


def hash_password(password: str, *, salt: bytes | None = None, iterations: int = HASH_ITERATIONS) -> str:
    """The stored form of a password: PBKDF2-HMAC-SHA256 with a random 16-byte salt, as
    perflake.gate.PasswordFile checks it."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations, dklen=32)
    return f"pbkdf2_sha256:{iterations}:{base64.b64encode(salt).decode()}:{base64.b64encode(digest).decode()}"


def users(lake: Lake) -> list[str]:
    """The user names in the server's password file (none: no authentication)."""
    try:
        lines = password_file(lake).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [ln.split(":", 1)[0] for ln in lines if ln.count(":") == 4]


def add_user(lake: Lake, name: str, password: str) -> None:
    """Add `name` (or change its password). The file holds salted hashes only and is
    readable by its owner only; a running server sees the change at the next login."""
    safe_name(name, "user name")
    if len(password) < 8:
        raise ValueError("the password is shorter than 8 characters; choose a longer one")
    kept = [ln for ln in _password_lines(lake) if ln.split(":", 1)[0] != name]
    _write_password_lines(lake, kept + [f"{name}:{hash_password(password)}"])


def remove_user(lake: Lake, name: str) -> bool:
    """Remove `name`; False if there was no such user."""
    lines = _password_lines(lake)
    kept = [ln for ln in lines if ln.split(":", 1)[0] != name]
    if len(kept) == len(lines):
        return False
    _write_password_lines(lake, kept)
    return True


def check_password(lake: Lake, name: str, password: str) -> bool:
    """Whether the password file accepts `name` with `password` (as the server would)."""
    for line in _password_lines(lake):
        user, scheme, iterations, salt, digest = (line.split(":") + [""] * 5)[:5]
        if user == name and scheme == "pbkdf2_sha256":
            stored = f"{scheme}:{iterations}:{salt}:{digest}"
            return hmac.compare_digest(hash_password(password, salt=base64.b64decode(salt),
                                                     iterations=int(iterations)), stored)
    return False


def _password_lines(lake: Lake) -> list[str]:
    try:
        return [ln for ln in password_file(lake).read_text().splitlines() if ln.count(":") == 4]
    except FileNotFoundError:
        return []


def _write_password_lines(lake: Lake, lines: list[str]) -> None:
    path = password_file(lake)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(ln + "\n" for ln in lines))
    tmp.replace(path)
