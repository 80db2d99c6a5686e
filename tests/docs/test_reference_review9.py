"""docs/reference.md: every public name, error and model setting is documented (D4 names what escapes
a run, D25 the model settings), and its examples run as written: a handler's ToolError text and a
result that is not JSON reach the model as HANDLER_ERROR (D4: never an exception that kills the loop),
and the live-client example completes against a loopback server speaking the Responses API
(WIRE.md section 1)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

import callbound as cb
from callbound.runtime.checks import SETTINGS_KEYS
from tests.recordings import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def _docs() -> str:
    pages = sorted((REPO_ROOT / "docs").glob("*.md"))
    return (REPO_ROOT / "README.md").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in pages
    )


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", REFERENCE.read_text(encoding="utf-8"), re.S)


def _run(block: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(block, str(REFERENCE), "exec"), {"__name__": "reference"})
    return buf.getvalue()


def test_the_readme_links_the_reference() -> None:
    assert "docs/reference.md" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_every_public_name_is_documented() -> None:
    docs = _docs()
    missing = [n for n in cb.__all__ if not re.search(r"`" + re.escape(n) + r"`", docs)]
    assert missing == []


def test_every_error_has_a_row_in_the_errors_table() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \| `", text, re.M))
    errors = [
        n for n in cb.__all__ if isinstance(getattr(cb, n), type) and issubclass(getattr(cb, n), Exception)
    ]
    assert [n for n in errors if n not in rows] == []


def test_every_settings_key_and_context_field_is_documented() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert [k for k in sorted(SETTINGS_KEYS) if f"| `{k}` |" not in text] == []
    fields = [f.name for f in dataclasses.fields(cb.CallContext)]
    assert [f for f in fields if f"`{f}`" not in text] == []
    for where in ("callbound.adapters.base", "make_client", '{"ref": "module:factory"'):
        assert where in text


def test_the_handler_example_prints_what_it_says() -> None:
    block = _blocks()[0]
    (said,) = re.findall(r"^# prints (.*)$", block, re.M)
    assert _run(block).strip() == said


def test_the_stream_caps_example_runs() -> None:
    _run(_blocks()[2])


class _Responses(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        sent = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(sent)
        answered = any(i.get("type") == "function_call_output" for i in sent["input"])
        out: dict[str, Any] = (
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Shipped."}]}
            if answered
            else {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_order",
                "arguments": '{"order_id": "A1"}',
            }
        )
        raw = json.dumps({"id": f"resp_{len(self.bodies)}", "status": "completed", "output": [out]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def responses_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Responses)
    _Responses.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_the_live_client_example_completes(responses_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", responses_server)  # the SDK's own variable: no edit to the example
    assert _run(_blocks()[1]).strip() == "COMPLETED Shipped."
    assert [b["model"] for b in _Responses.bodies] == ["gpt-4.1-mini"] * 2
    assert all(b["max_output_tokens"] == 1024 for b in _Responses.bodies)
