"""Review round 15: with GOOGLE_API_KEY and GEMINI_API_KEY both set, the Gemini clients use the key
google-genai uses (GOOGLE_API_KEY: ``_api_client.get_env_api_key`` prefers it), as issue 3 §7 asks
("API keys come from the SDKs' usual environment variables"). callbound read GEMINI_API_KEY first, so
it sent another credential than the SDK would, and refused a run over a bad GEMINI_API_KEY although
GOOGLE_API_KEY held a good one."""

from __future__ import annotations

import pytest

from callbound.core.errors import UsageError
from callbound.transports import api_key_for


@pytest.mark.parametrize("api", ["gemini-generate", "gemini-interactions"])
def test_google_api_key_wins_over_gemini_api_key_as_in_google_genai(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "key-from-gemini")
    monkeypatch.setenv("GOOGLE_API_KEY", "key-from-google")
    assert api_key_for(api) == "key-from-google"
    monkeypatch.setenv("GEMINI_API_KEY", "bad\n")  # unused, so not in the way
    assert api_key_for(api) == "key-from-google"
    monkeypatch.delenv("GOOGLE_API_KEY")
    with pytest.raises(UsageError, match="GEMINI_API_KEY ends with a newline"):
        api_key_for(api)
    monkeypatch.setenv("GEMINI_API_KEY", "key-from-gemini")
    assert api_key_for(api) == "key-from-gemini"


def test_the_sdk_itself_prefers_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins the SDK behaviour the order above follows, where the extra is installed."""
    api_client = pytest.importorskip("google.genai._api_client")
    monkeypatch.setenv("GEMINI_API_KEY", "key-from-gemini")
    monkeypatch.setenv("GOOGLE_API_KEY", "key-from-google")
    assert api_client.get_env_api_key() == "key-from-google"
