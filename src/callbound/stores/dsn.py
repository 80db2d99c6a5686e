"""The password of a PostgreSQL connection URL, kept out of what callbound prints (review round 18, d F5;
round 19, d F2). No psycopg here: the CLI shows store URLs of every kind with it."""

from __future__ import annotations

import re
from urllib.parse import unquote

_POSTGRES = ("postgresql://", "postgres://")
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#]*")


def _hidden(m: re.Match[str]) -> str:
    return f"{m.group(1)}***"


def _secrets(url: str) -> set[str]:
    """The passwords a connection URL or key=value string holds, as written and percent-decoded."""
    found: list[str] = []
    if "://" in url:
        authority = url.split("://", 1)[1].split("?", 1)[0]
        userinfo = authority[: authority.rfind("@")] if "@" in authority else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
        found += re.findall(r"[?&]password=([^&#]*)", url)
    else:
        found += [v.strip("'") for v in re.findall(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", url)]
    return {v for f in found for v in (f, unquote(f)) if v}


def redact(text: str, url: str) -> str:
    """``text`` (a libpq error, which echoes a URL it cannot parse whole, or the URL itself) without the
    URL's password: each is shown as ``***``."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def shown_url(url: str) -> str:
    """A store URL as callbound prints it (banners, the commands it suggests): a PostgreSQL URL's password,
    in its user part or as a ``password=`` parameter, shown as ``***``; any other URL as it is."""
    if not url.startswith(_POSTGRES):
        return url
    scheme, rest = url.split("://", 1)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]  # [user[:password]@]host[:port]
    at = authority.rfind("@")
    if at > 0 and ":" in authority[:at]:
        user = authority[:at].split(":", 1)[0]
        rest = f"{user}:***{rest[at:]}"
    return f"{scheme}://{_PASSWORD_PARAM.sub(_hidden, rest)}"
