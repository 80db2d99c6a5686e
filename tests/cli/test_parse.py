"""``callbound parse`` reads all three input forms (plain body, raw SSE, JSON-lines) for all five APIs,
through the real console entry point; D28 exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from callbound.adapters.sse import iter_payloads
from tests.recordings import load_cassette, read_bytes, response_body

CLI = [sys.executable, "-m", "callbound.cli", "parse"]


def parse(api: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "--api", api, "-"], input=data, capture_output=True, timeout=60)


def plain(api: str) -> bytes:
    if api == "openai-responses":
        body: Any = response_body(
            load_cassette(
                "openai-responses/pydantic-ai__test_openai_responses_model_simple_response_with_tool_call.yaml"
            )[0]
        )
        return json.dumps(body).encode()
    if api == "openai-chat":
        body = response_body(load_cassette("openai-chat/pydantic-ai__test_openai_tool_output.yaml")[0])
        return json.dumps(body).encode()
    return read_bytes(
        {
            "anthropic-messages": "anthropic/ai__anthropic-tool-no-args.json",
            "gemini-generate": "gemini/ai__google-tool-call.json",
            "gemini-interactions": "gemini-interactions/ai__steps__tool-call-step1.json",
        }[api]
    )


def stream_bytes(api: str) -> bytes:
    if api == "openai-responses":
        text = response_body(
            load_cassette("openai-responses/pydantic-ai__test_openai_responses_stream.yaml")[0]
        )
        assert isinstance(text, str)
        return text.encode()
    return read_bytes(
        {
            "openai-chat": "openai-chat/openai-python__a247c49c5fcd__parse_strict_tools.sse.bin",
            "anthropic-messages": "anthropic/anthropic-sdk-python__tool_use_response.txt",
            "gemini-generate": "gemini/ai__google-tool-call.chunks.txt",
            "gemini-interactions": "gemini-interactions/ai__steps__tool-call-step2.chunks.txt",
        }[api]
    )


def as_sse(payloads: list[Any]) -> bytes:
    out = []
    for p in payloads:
        text = p if isinstance(p, str) else json.dumps(p)
        out.append(f"data: {text}\r\n\r\n")
    return "".join(out).encode()


def as_jsonl(payloads: list[Any]) -> bytes:
    return "".join(json.dumps(p) + "\n" for p in payloads if not isinstance(p, str)).encode()


APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate", "gemini-interactions"]


def comparable(out: dict[str, Any]) -> dict[str, Any]:
    """Synthetic response ids (D7) hash the raw bytes, so they differ between forms of one stream."""
    out = dict(out)
    if str(out["response_id"]).startswith("cb:"):
        out["response_id"] = "cb:*"
    return out


@pytest.mark.parametrize("api", APIS)
def test_plain_body(api: str) -> None:
    r = parse(api, plain(api))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {
        "api",
        "response_id",
        "finish",
        "raw_stop_reason",
        "reason",
        "text",
        "refusal",
        "calls",
        "usage",
    }
    assert out["api"] == api
    assert out["finish"] == "TOOL_PROPOSALS"
    assert out["calls"] and all(
        set(c) == {"call_id", "name", "arguments", "arguments_error"} for c in out["calls"]
    )
    assert set(out["usage"]) == {"input_tokens", "output_tokens"}


@pytest.mark.parametrize("api", APIS)
def test_sse_and_jsonl_forms_of_one_stream_agree(api: str) -> None:
    raw = stream_bytes(api)
    payloads = list(iter_payloads([raw]))
    results = []
    for data in (raw, as_sse(payloads), as_jsonl(payloads)):
        r = parse(api, data)
        assert r.returncode == 0, r.stderr
        results.append(comparable(json.loads(r.stdout)))
    assert results[0]["finish"] in ("TOOL_PROPOSALS", "FINAL_TEXT")
    if api != "openai-chat":  # Chat's terminal [DONE] has no JSON-lines form
        assert results[0] == results[2]
    assert results[0] == results[1]


def test_provider_error_body_is_an_api_failure_turn() -> None:
    r = parse("openai-responses", read_bytes("openai-responses/ai__openai-error.1.json"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["finish"] == "API_FAILURE"
    assert out["raw_stop_reason"] == "insufficient_quota"


def test_arguments_are_null_when_unreadable() -> None:
    body = {
        "id": "resp_x",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc",
                "call_id": "call_1",
                "name": "f",
                "arguments": '{"a": 1, "a": 2}',
            }
        ],
    }
    out = json.loads(parse("openai-responses", json.dumps(body).encode()).stdout)
    assert out["calls"][0]["arguments"] is None
    assert "duplicate key" in out["calls"][0]["arguments_error"]


@pytest.mark.parametrize("data", [b"", b"not json at all {", b"\xff\xfe\x00garbage", b"data: {broken\n\n"])
def test_unreadable_input_exits_2_with_one_line(data: bytes) -> None:
    r = parse("openai-responses", data)
    assert r.returncode == 2
    assert r.stdout == b""
    assert len(r.stderr.decode().strip().splitlines()) == 1


def test_unknown_api_exits_2(tmp_path: Path) -> None:
    r = parse("openai-completions", b"{}")
    assert r.returncode == 2
