"""A ``base_url`` no request can reach is a ``UsageError`` when the client is made (review round 20, f).

``localhost:8080`` without its scheme, ``ftp://...``, ``http://`` with no host, a URL with a query or
whitespace: each was accepted, then every request failed as a connection error, retried
``Budgets.max_retries`` times after the operation was stored, and the operation ended
FAILED(CONNECTION_ERROR), on both transports. The check is ``check_client_args``'s, which every client
runs when made (the other wrong arguments it refuses, review 13 and 16).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from callbound.core.errors import UsageError
from callbound.transports import make_client
from callbound.transports.http import HttpModel

KEY = "test-key-not-secret"

REFUSED = [
    pytest.param("localhost:8080", "http:// or https://", id="no-scheme"),
    pytest.param("127.0.0.1:8080/v1", "http:// or https://", id="no-scheme-ip"),
    pytest.param("ftp://example.com", "http:// or https://", id="ftp"),
    pytest.param("http//example.com", "http:// or https://", id="no-colon"),
    pytest.param("http://", "names no host", id="no-host"),
    pytest.param("https://:8080", "names no host", id="port-only"),
    pytest.param("http://example.com:99999", "does not parse", id="port-out-of-range"),
    pytest.param("https://example.com/v1?key=1", "query or fragment", id="query"),
    pytest.param("https://example.com/#x", "query or fragment", id="fragment"),
    pytest.param(" https://example.com", "whitespace", id="leading-space"),
    pytest.param("https://exa mple.com", "whitespace", id="inner-space"),
    pytest.param("https://example.com\n", "whitespace", id="newline"),
]

ACCEPTED = [
    "http://127.0.0.1:8080",
    "https://api.openai.com/v1",
    "HTTPS://EXAMPLE.COM/",
    "http://[::1]:8080",
    "https://proxy.example.com/openai",
    "http://localhost",
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_make_client_refuses_a_base_url_no_request_can_reach(url: str, why: str, transport: str) -> None:
    with pytest.raises(UsageError, match="must be the server's URL") as info:
        make_client("openai-chat", transport=transport, model="m", base_url=url, api_key=KEY)
    assert why in str(info.value)


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_each_client_class_refuses_it_too(url: str, why: str) -> None:
    makers: list[Any] = [lambda: HttpModel("openai-chat", base_url=url, api_key=KEY)]
    try:
        from callbound.transports.openai import OpenAIModel

        makers.append(lambda: OpenAIModel("openai-chat", base_url=url, api_key=KEY))
    except ImportError:
        pass
    try:
        from callbound.transports.anthropic import AnthropicModel

        makers.append(lambda: AnthropicModel(base_url=url, api_key=KEY))
    except ImportError:
        pass
    try:
        from callbound.transports.gemini import GeminiModel

        makers.append(lambda: GeminiModel(base_url=url, api_key=KEY, model="g"))
    except ImportError:
        pass
    for make in makers:
        with pytest.raises(UsageError, match=why):
            make()


@pytest.mark.parametrize("url", ACCEPTED)
@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_server_urls_are_accepted(url: str, transport: str) -> None:
    client = make_client("openai-chat", transport=transport, model="m", base_url=url, api_key=KEY)
    assert client.api == "openai-chat"


def test_the_message_does_not_echo_the_url() -> None:
    with pytest.raises(UsageError) as info:
        make_client("openai-chat", transport="http", base_url="ftp://user:s3cret@example.com", api_key=KEY)
    assert "s3cret" not in str(info.value)


def test_the_cli_exits_2_saying_what_is_wrong(tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "run", "--api", "openai-chat", "--model", "m",
         "--transport", "http", "--base-url", "localhost:8080", "hi"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**env, "OPENAI_API_KEY": KEY, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "base_url" in done.stderr and "http:// or https://" in done.stderr
