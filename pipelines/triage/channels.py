"""The Airflow notifiers that carry perflake's digests: email through the SMTP provider's
SmtpNotifier (server, port, TLS and credentials from an Airflow SMTP connection), and a
webhook notifier posting Slack-compatible JSON.

Both are called with `notify(context)`: the digest text is data, not a template, so it
is never rendered by Jinja.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from airflow.sdk import BaseNotifier

FROM_ENV = "PERFLAKE_NOTIFY_FROM"  # sender address, when the SMTP connection has no from_email


class WebhookNotifier(BaseNotifier):
    """POST a JSON payload (Slack incoming-webhook shape: text plus blocks) to a URL; any
    answer other than 2xx is an error naming the URL's host and the status."""

    def __init__(self, url: str, payload: dict, timeout_s: float = 10.0, **kwargs):
        super().__init__(**kwargs)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook URL {url!r} is not http(s)")
        self.url, self.payload, self.timeout_s = url, payload, timeout_s

    def notify(self, context) -> None:
        body = json.dumps(self.payload).encode()
        req = urllib.request.Request(self.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "perflake"})
        host = urllib.request.urlparse(self.url).netloc
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                status = resp.status
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"webhook {host} answered HTTP {e.code}: {e.read()[:200]!r}") from None
        except urllib.error.URLError as e:
            raise RuntimeError(f"webhook {host} unreachable: {e.reason}") from None
        if not 200 <= status < 300:
            raise RuntimeError(f"webhook {host} answered HTTP {status}")


def email_notifier(to: list[str], subject: str, html: str, conn_id: str):
    """The SMTP provider's notifier for one message through Airflow connection `conn_id`."""
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    return SmtpNotifier(to=list(to), from_email=os.environ.get(FROM_ENV) or None, subject=subject,
                        html_content=html, smtp_conn_id=conn_id)
