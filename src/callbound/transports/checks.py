"""Argument checks of the live clients: ``make_client`` and every client class run
``check_client_args`` when made, so that a wrong argument is a ``UsageError`` then, not a failed (and
retried) request after the operation is stored; ``check_key`` also guards keys read from the
environment (``api_key_for``), ``env_base_url`` the base URL an SDK reads from its variable and
``openai_env_headers`` the organization and project the openai SDK reads from its variables, for both
transports alike (review round 21, c)."""

from __future__ import annotations

import math
import os
from urllib.parse import urlsplit

from ..adapters.base import StreamCaps
from ..core.errors import UsageError

__all__ = [
    "BASE_URL_ENV",
    "OPENAI_HEADER_ENV",
    "check_base_url",
    "check_client_args",
    "check_header_value",
    "check_headers",
    "check_key",
    "env_base_url",
    "openai_env_headers",
    "sdk_base_url",
]

# The variable each SDK reads its base URL from when it is given none (openai, anthropic, google-genai).
BASE_URL_ENV = {
    "openai-responses": "OPENAI_BASE_URL",
    "openai-chat": "OPENAI_BASE_URL",
    "anthropic-messages": "ANTHROPIC_BASE_URL",
    "gemini-generate": "GOOGLE_GEMINI_BASE_URL",
    "gemini-interactions": "GOOGLE_GEMINI_BASE_URL",
}

# The headers the openai SDK sends from these variables when the client is given no organization or
# project (openai lib/_client_auth.py): HttpModel sends them too, so the same environment names the
# same organization whichever transport carries the request.
OPENAI_HEADER_ENV = (("openai-organization", "OPENAI_ORG_ID"), ("openai-project", "OPENAI_PROJECT_ID"))


def env_base_url(api: str) -> str | None:
    """The value of the SDK's base-URL variable for ``api`` (``BASE_URL_ENV``), checked like a
    ``base_url`` argument (a ``UsageError`` naming the variable), or None when it is unset or empty:
    the provider's own URL then, on both transports (the SDKs took an empty one for the URL itself, so
    every request failed as a retried connection error)."""
    name = BASE_URL_ENV.get(api)
    value = os.environ.get(name) if name else None
    if not value:
        return None
    check_base_url(value, f"the environment variable {name}")
    return value


def sdk_base_url(api: str, base_url: str | None, default: str) -> str | None:
    """The base URL to make an SDK client with: ``base_url`` when given, else its variable's
    (``env_base_url``, checked), else ``default`` (the provider's) where the variable is set but empty,
    as ``HttpModel`` reads it (the openai and anthropic SDKs took the empty string for their URL),
    else None (the SDK's own default)."""
    if base_url is not None:
        return base_url
    found = env_base_url(api)
    if found is None and os.environ.get(BASE_URL_ENV.get(api, "")) == "":
        return default
    return found


def openai_env_headers() -> dict[str, str]:
    """The ``OpenAI-Organization`` and ``OpenAI-Project`` headers from ``OPENAI_ORG_ID`` and
    ``OPENAI_PROJECT_ID``; an unset or empty variable sends none. A value no HTTP header can carry
    (whitespace at either end, a newline, a non-ASCII or control character) is a ``UsageError`` naming
    the variable: it failed every request locally, over either transport, as a connection error
    retried until FAILED(CONNECTION_ERROR) after the operation was stored, or raised
    ``UnicodeEncodeError`` out of the client."""
    headers: dict[str, str] = {}
    for header, name in OPENAI_HEADER_ENV:
        value = os.environ.get(name)
        if value:
            check_key(value, f"the environment variable {name}", what="its value")
            headers[header] = value
    return headers


def check_key(key: str, where: str, *, what: str = "the key") -> None:
    """Refuse a key that no HTTP header can carry (a trailing newline from a key file, a non-ASCII or
    control character) with a ``UsageError`` naming the character class and its place, never the key:
    it used to be accepted, then every request failed locally as a retried connection error (4
    attempts, FAILED(CONNECTION_ERROR)) while httpcore and the anthropic SDK logged the whole key at
    DEBUG in their header errors (review 14). ``where`` names the source (an argument, a variable)."""
    problem = None
    if key.endswith("\n"):
        problem = "ends with a newline (as read from a file?)"
    elif key != key.strip():
        problem = "starts or ends with whitespace"
    else:
        for i, ch in enumerate(key, 1):
            if ord(ch) > 0x7E:
                problem = f"holds a non-ASCII character at position {i} of {len(key)}"
            elif ord(ch) < 0x20 or ord(ch) == 0x7F:
                problem = f"holds a control character (U+{ord(ch):04X}) at position {i} of {len(key)}"
            if problem:
                break
    if problem:
        raise UsageError(f"{where} {problem}: no HTTP header can carry {what}; fix it")


def check_client_args(
    owner: str,
    api: object,
    *,
    model: object = None,
    base_url: object = None,
    api_key: object = None,
    timeout_s: object = None,
    caps: object = None,
) -> None:
    """Types first, so a wrong one is a ``UsageError`` here rather than at the first request, after the
    operation is stored: ``timeout_s="30"`` failed every request as a retried connection error,
    ``timeout_s=-1`` bounded every request to the 1 ms floor of ``effective_timeout``, ``api_key=123``
    was accepted, and ``base_url=5`` raised AttributeError. ``owner`` names the caller in the message:
    ``make_client`` and every client class (``HttpModel``, ``OpenAIModel``, ``AnthropicModel``,
    ``GeminiModel``, ``ScriptedModel``) check their arguments here, since a class made directly took
    ``caps={...}`` or ``timeout_s="30"`` and failed every request, each one sent and paid for, as a
    retried connection error."""
    if not isinstance(api, str):
        raise UsageError(f"the API is a name such as 'openai-responses', not {type(api).__name__}")
    for what, value in (("model", model), ("base_url", base_url), ("api_key", api_key)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise UsageError(f"{owner}({what}=...) takes a string or None, not {type(value).__name__}")
        try:
            value.encode("utf-8")  # sent in every request: the URL, a header, the body
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"{owner}({what}=...) holds a lone surrogate at {exc.start}, which no request can carry"
            ) from exc
    if isinstance(api_key, str):
        check_key(api_key, f"{owner}(api_key=...)")
    if api == "gemini-generate" and isinstance(model, str) and any(s in model for s in ("..", "?", "&")):
        # the model is part of the URL: google-genai refuses such a name before sending (ValueError, which
        # the runner took for a failed connection and retried until FAILED) and HttpModel's request met a
        # 404; one answer on both transports, before anything is stored
        raise UsageError(
            f"{owner}(model=...) names no gemini-generate model: a model name holds no '..', '?' or '&'"
        )
    if isinstance(base_url, str):
        check_base_url(base_url, f"{owner}(base_url=...)")
    if timeout_s is not None and (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise UsageError(f"{owner}(timeout_s=...) takes seconds, a number > 0, or None, not {timeout_s!r}")
    if caps is not None and not isinstance(caps, StreamCaps):
        raise UsageError(
            f"{owner}(caps=...) takes a StreamCaps (callbound.adapters.base) or None, "
            f"not {type(caps).__name__}"
        )


# RFC 9110 5.6.2: a field name is a token
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_headers(owner: str, headers: object) -> None:
    """``headers`` (``HttpModel(headers=...)``): None or a dict of field names (tokens) to values an
    HTTP header can carry, else a ``UsageError`` naming the header (never its value, which may be a
    key). A value that was not a string, or one with a non-ASCII character, raised TypeError or
    UnicodeEncodeError out of every request, and a newline or a space in a name failed every request
    as a connection error, each retried until FAILED after the operation was stored (review round 21,
    c). A value may be bytes, and hold a space or tab inside, as httpx sends them (RFC 9110 5.5: a
    field value's SP and HTAB between visible characters; a byte 0x80-0xFF is obs-text), checked as its
    latin-1 text (``check_header_value``); a string value stays ASCII, since httpx encodes it so
    (review round 22, d)."""
    if headers is None:
        return
    try:
        pairs = dict(headers)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise UsageError(
            f"{owner}(headers=...) takes a dict of header names to values, not {type(headers).__name__}"
        ) from None
    for name, value in pairs.items():
        if not isinstance(name, str) or not name or not set(name) <= _TOKEN:
            raise UsageError(f"{owner}(headers=...) has a header name {name!r} that is no HTTP field name")
        if not isinstance(value, str | bytes):
            raise UsageError(
                f"{owner}(headers=...): {name} takes a string or bytes value, not {type(value).__name__}"
            )
        check_header_value(value, f"{owner}(headers=...): the value of {name}")


def check_header_value(value: str | bytes, where: str) -> None:
    """Refuse a header value no request can carry, as ``check_key`` does a key, naming the character
    class and its place, never the value: RFC 9110 5.5 field-content is visible characters (and, in
    bytes, obs-text 0x80-0xFF, which httpx and h11 send as they are) with spaces and tabs only between
    them. So a newline, CR, NUL or other control character anywhere, whitespace at either end, or a
    non-ASCII character in a string (httpx encodes a string as ASCII) is a ``UsageError``."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    problem = None
    if text.endswith("\n"):
        problem = "ends with a newline (as read from a file?)"
    elif text != text.strip(" \t"):
        problem = "starts or ends with whitespace"
    else:
        for i, ch in enumerate(text, 1):
            if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
                problem = f"holds a control character (U+{ord(ch):04X}) at position {i} of {len(text)}"
            elif ord(ch) > 0x7E and not isinstance(value, bytes):
                problem = f"holds a non-ASCII character at position {i} of {len(text)}"
            if problem:
                break
    if problem:
        raise UsageError(f"{where} {problem}: no HTTP header can carry it; fix it")


def check_base_url(base_url: str, where: str) -> None:
    """An http(s) URL naming a host, with no query, fragment or whitespace: anything else (``localhost:8080``
    without its scheme, ``ftp://...``, ``http://``) failed every request as a connection error, retried
    ``Budgets.max_retries`` times after the operation was stored, then FAILED(CONNECTION_ERROR) (review
    round 20, f). ``where`` names the source: an argument, an environment variable."""
    wanted = f"{where} must be the server's URL, such as 'http://127.0.0.1:8080' (or None for the provider's)"
    if not base_url.strip():
        raise UsageError(wanted)
    problem = None
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in base_url):
        problem = "holds whitespace or a control character"
    else:
        try:
            parts = urlsplit(base_url)
            host = parts.hostname
            parts.port  # noqa: B018 (raises ValueError for a port out of range or not a number)
        except ValueError as exc:
            problem = f"does not parse: {exc}"
        else:
            if parts.scheme.lower() not in ("http", "https"):
                problem = "does not start with http:// or https://"
            elif not host:
                problem = "names no host"
            elif parts.query or parts.fragment or base_url.endswith(("?", "#")):
                problem = "has a query or fragment; the client adds each API's path to it"
    if problem:
        raise UsageError(f"{wanted}: the one given {problem}")  # not echoed: it may hold a password
