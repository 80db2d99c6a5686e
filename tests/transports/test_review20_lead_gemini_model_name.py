"""A gemini-generate model name holding '..', '?' or '&' is a UsageError when the client is made, on
both transports (review round 20, lead; found by f). The model is part of the URL: google-genai refuses
such a name before sending, with a ValueError that the runner took for a failed connection, retried
and ended FAILED after the operation was stored; HttpModel's request met a 404."""

from __future__ import annotations

import pytest

from callbound.core.errors import UsageError
from callbound.transports import make_client
from callbound.transports.http import HttpModel

BAD = ["gemini-2.5-flash?alt=json", "../models/gemini-2.5-flash", "gemini&key=x", "tunedModels/../x"]


@pytest.mark.parametrize("name", BAD)
def test_http_model_refuses_the_name(name: str) -> None:
    with pytest.raises(UsageError, match=r"holds no '\.\.', '\?' or '&'"):
        HttpModel("gemini-generate", api_key="k", model=name)


@pytest.mark.parametrize("name", BAD)
def test_gemini_model_refuses_the_name(name: str) -> None:
    pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') is not installed")
    from callbound.transports.gemini import GeminiModel

    with pytest.raises(UsageError, match="names no gemini-generate model"):
        GeminiModel("gemini-generate", api_key="k", model=name)


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_make_client_refuses_the_name(transport: str) -> None:
    if transport == "sdk":
        pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') is not installed")
    with pytest.raises(UsageError, match="names no gemini-generate model"):
        make_client("gemini-generate", transport=transport, api_key="k", model="gemini?x")


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "models/gemini-2.5-flash", "tunedModels/abc-123"])
def test_ordinary_names_are_taken(name: str) -> None:
    assert HttpModel("gemini-generate", api_key="k", model=name).model == name


def test_other_apis_keep_their_names() -> None:
    """Only gemini-generate puts the model in the URL; elsewhere the name goes in the body as given."""
    assert HttpModel("openai-chat", api_key="k", model="a&b").model == "a&b"
