"""tests/fake_anthropic.py speaks Anthropic's Messages protocol as real clients read it.

Checked with httpx on the wire (every event of a stream, in order) and with litellm's Anthropic
provider, a real client that parses the protocol itself (slow: litellm's import). The `claude` CLI
reads it in tests/test_hooks_claude.py (slow)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from fake_anthropic import FakeAnthropic, request_text

BODY = {"model": "claude-test-1", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


def events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The SSE events of a streamed response: (event name, data)."""
    out, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[6:])))
    return out


def test_plain_and_streamed_text_tools_and_recording(fake_anthropic):
    fake_anthropic.push("Hello there", {"text": "Let me look.", "tool_use": [{"name": "grep", "input": {"q": "x"}}]})
    with httpx.Client(base_url=fake_anthropic.base_url) as client:
        plain = client.post("/v1/messages?beta=true", json={**BODY, "system": [{"type": "text", "text": "be brief"}]},
                            headers={"x-api-key": "sk-test"}).json()
        with client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response:
            assert response.headers["content-type"] == "text/event-stream"
            streamed = events(response)
    assert plain["type"] == "message" and plain["content"] == [{"type": "text", "text": "Hello there"}]
    assert plain["stop_reason"] == "end_turn" and plain["usage"] == {"input_tokens": 10, "output_tokens": 5}
    names = [name for name, _ in streamed]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in streamed)
    text = "".join(d["delta"]["text"] for _, d in streamed if d.get("delta", {}).get("type") == "text_delta")
    arguments = "".join(d["delta"]["partial_json"] for _, d in streamed
                        if d.get("delta", {}).get("type") == "input_json_delta")
    assert text == "Let me look." and json.loads(arguments) == {"q": "x"}
    tool_start = next(d for _, d in streamed if d["type"] == "content_block_start" and d["index"] == 1)
    assert tool_start["content_block"]["name"] == "grep"
    assert streamed[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert fake_anthropic.paths == ["/v1/messages?beta=true", "/v1/messages"]
    assert fake_anthropic.headers[0]["X-Api-Key"] == "sk-test"
    assert request_text(fake_anthropic.requests[0]) == "be brief\nhi"


def test_errors_count_tokens_models_and_callable_items(fake_anthropic):
    fake_anthropic.push({"status": 529}, lambda body: f"you said {body['messages'][-1]['content']}",
                        {"chunks": ["a", "b"], "error_event": {"type": "overloaded_error", "message": "gone"}})
    with httpx.Client(base_url=fake_anthropic.base_url) as client:
        refused = client.post("/v1/messages", json=BODY)
        echoed = client.post("/v1/messages", json=BODY).json()
        with client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response:
            broken = events(response)
        counted = client.post("/v1/messages/count_tokens", json=BODY).json()
        models = client.get("/v1/models").json()
    assert refused.status_code == 529 and refused.json()["error"]["type"] == "overloaded_error"
    assert echoed["content"][0]["text"] == "you said hi"
    assert broken[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "gone"}})
    assert counted["input_tokens"] > 0 and fake_anthropic.count_requests == [BODY]
    assert [m["id"] for m in models["data"]] == ["claude-test-1"]
    assert len(fake_anthropic.requests) == 3  # count_tokens is not a scripted request


def test_an_unscripted_request_is_an_error_and_held_streams_wait():
    fake = FakeAnthropic()
    try:
        with httpx.Client(base_url=fake.base_url) as client:
            answer = client.post("/v1/messages", json=BODY)
            assert answer.status_code == 500 and "no scripted reply" in answer.json()["error"]["message"]
            assert fake.unscripted == 1
            hold = threading.Event()
            fake.push({"text": "slow", "hold": hold})
            with client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response:
                lines = response.iter_lines()
                seen = []
                for line in lines:
                    seen.append(line)
                    if '"content_block_stop"' in line:
                        break
                assert not any("message_stop" in line for line in seen)
                hold.set()
                assert any("message_stop" in line for line in lines)
    finally:
        fake.close()


@pytest.mark.slow  # litellm's import alone takes 3 s quiet, 25 s at load 15
@pytest.mark.parametrize("stream", [False, True])
def test_litellm_reads_it_as_anthropic(fake_anthropic, monkeypatch, stream):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    fake_anthropic.push({"text": "Paris is the capital.", "tool_use": [{"name": "lookup", "input": {"city": "Paris"}}]})
    answer = litellm.completion(model="anthropic/claude-test-1", api_base=fake_anthropic.base_url, api_key="sk-test",
                                messages=[{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": "capital of France?"}],
                                tools=[{"type": "function", "function": {"name": "lookup", "parameters": {
                                    "type": "object", "properties": {"city": {"type": "string"}}}}}],
                                stream=stream)
    if stream:
        answer = litellm.stream_chunk_builder(list(answer))
    message = answer.choices[0].message
    assert message.content == "Paris is the capital."
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}
    sent = fake_anthropic.requests[0]
    assert sent["system"][0]["text"] == "be brief" if isinstance(sent["system"], list) else sent["system"] == "be brief"
    assert fake_anthropic.headers[0]["x-api-key"] == "sk-test"
