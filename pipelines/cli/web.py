"""`perflake web`: the dashboard (pipelines/web, docs/web.md) on this machine.

  perflake web                          # http://127.0.0.1:8080/ (loopback only)
  perflake web --port 9000
  PERFLAKE_WEB_TOKEN=... perflake web --host 0.0.0.0 --allow-remote   # others may connect, with the token
"""
from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from pipelines.cli.args import port_arg
from pipelines.config.lake import Lake

LOOPBACK_NAMES = ("localhost",)


def register(sub) -> None:
    p = sub.add_parser("web", help="serve the dashboard (overview, series, regressions, compare, roofline)",
                       description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_arg, default=8080)
    p.add_argument("--allow-remote", action="store_true",
                   help="allow an address other than loopback; a token is then required")
    p.add_argument("--token-file", help="file holding the access token (default: $PERFLAKE_WEB_TOKEN)")
    p.set_defaults(func=_cmd_web)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def access_token(token_file: str | None) -> str | None:
    """The token from --token-file or $PERFLAKE_WEB_TOKEN; an error if it is too short to guess at."""
    token = Path(token_file).read_text().strip() if token_file else os.environ.get("PERFLAKE_WEB_TOKEN", "").strip()
    if token and len(token) < 16:
        raise ValueError("the web token must be at least 16 characters (e.g. python -c 'import secrets; "
                         "print(secrets.token_urlsafe(24))')")
    return token or None


def check_binding(host: str, allow_remote: bool, token: str | None) -> None:
    """Loopback needs nothing; any other address needs --allow-remote and a token."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise ValueError(f"--host {host} listens beyond this machine: add --allow-remote (and a token) to mean it")
    if not token:
        raise ValueError(f"--host {host} with --allow-remote needs a token: set $PERFLAKE_WEB_TOKEN or --token-file")


def address_line(host: str, port: int, token: bool) -> str:
    """Where to open the dashboard: a wildcard address is named by this machine's name
    (http://0.0.0.0:8080/ opens nothing elsewhere), an IPv6 literal goes in brackets."""
    if host in ("0.0.0.0", "::", ""):
        where = f"http://{socket.gethostname()}:{port}/ (listening on every interface)"
    else:
        where = f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
    if token:
        where += "; token required: open it once with ?token=<the token>, or send 'Authorization: Bearer <the token>'"
    return where


def _cmd_web(args) -> int:
    import uvicorn

    from pipelines.web.app import create_app

    token = access_token(args.token_file)
    check_binding(args.host, args.allow_remote, token)
    lake = Lake.from_env()
    from pipelines.cli.failures import check_port_free

    check_port_free(args.host, args.port, "choose another with --port N (make web PORT=N)")
    print(f"perflake web: lake {lake.root}; {address_line(args.host, args.port, bool(token))} (Ctrl-C to stop)",
          flush=True)
    uvicorn.run(create_app(lake, token=token), host=args.host, port=args.port, log_level="warning")
    return 0
