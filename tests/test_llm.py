"""memvault.store.llm against a real HTTP server, through real litellm (never patched)."""

import json
import subprocess
import sys
import time

import pydantic
import pytest
from fake_llm import *  # noqa: F403  (the fake_llm fixture, FakeLLM, refused_url)
from fake_llm import refused_url

from memvault.store.llm import LLMConfig, LLMError, chat, chat_stream, json_schema, structured

SECRET = "sk-test-secret-4f1c9e"
HELLO = [{"role": "user", "content": "hello"}]


class Facts(pydantic.BaseModel):
    facts: list[str]


class Pair(pydantic.BaseModel):
    name: str
    age: int


def assert_one_clean_line(message: str) -> None:
    assert "\n" not in message
    assert "Traceback" not in message and 'File "' not in message
    assert SECRET not in message


def test_importing_memvault_llm_does_not_import_litellm():
    code = "import sys, memvault.store.llm, memvault.learning.extraction, memvault.learning.prompts; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_api_key_not_in_repr():
    assert SECRET not in repr(LLMConfig("openai/m", api_key=SECRET))


def test_chat_returns_the_reply_and_sends_the_request(fake_llm):
    fake_llm.push("Anne is your wife.")
    assert chat(fake_llm.config(api_key=SECRET), HELLO) == "Anne is your wife."
    (body,) = fake_llm.requests
    assert body["model"] == "test-model"
    assert body["messages"] == HELLO
    assert body["temperature"] == 0.0
    assert fake_llm.headers[0]["Authorization"] == f"Bearer {SECRET}"


def test_chat_without_api_key_sends_a_dummy_one(fake_llm):
    fake_llm.push("ok")
    chat(fake_llm.config(), HELLO)
    assert fake_llm.headers[0]["Authorization"].startswith("Bearer ")


def test_chat_strips_think_block(fake_llm):
    fake_llm.push("<think>\nThe user greets me.\n</think>\n\nHello!")
    assert chat(fake_llm.config(), HELLO) == "Hello!"


def test_chat_stream_yields_pieces_in_order(fake_llm):
    fake_llm.push({"chunks": ["The ", "quick ", "brown ", "fox"]})
    pieces = list(chat_stream(fake_llm.config(), HELLO))
    assert pieces == ["The ", "quick ", "brown ", "fox"]
    assert fake_llm.requests[0]["stream"] is True


def test_chat_stream_splits_plain_reply(fake_llm):
    fake_llm.push("a reply long enough to be cut into several chunks")
    pieces = list(chat_stream(fake_llm.config(), HELLO))
    assert len(pieces) > 1
    assert "".join(pieces) == "a reply long enough to be cut into several chunks"


def test_chat_stream_drops_think_block_split_across_chunks(fake_llm):
    fake_llm.push({"chunks": ["<th", "ink>let me", " think</th", "ink>\n\n", "Sure", ", here."]})
    assert "".join(chat_stream(fake_llm.config(), HELLO)) == "Sure, here."


def test_chat_stream_keeps_text_that_only_looks_like_a_tag(fake_llm):
    fake_llm.push({"chunks": ["<b>", "bold</b>"]})
    assert "".join(chat_stream(fake_llm.config(), HELLO)) == "<b>bold</b>"


@pytest.mark.parametrize(
    "answer",
    [
        '{"facts": ["The user has a cat"]}',
        '```json\n{"facts": ["The user has a cat"]}\n```',
        'Sure! Here is the JSON:\n{"facts": ["The user has a cat"]}\nHope this helps.',
        '<think>The user mentions a cat {maybe}.</think>{"facts": ["The user has a cat"]}',
        '["The user has a cat"]',  # a bare list, wrapped into the single list field
        '{"note": 1} then {"facts": ["The user has a cat"]}',  # first value that validates
    ],
)
def test_structured_parses_tolerantly(fake_llm, answer):
    fake_llm.push(answer)
    result = structured(fake_llm.config(), HELLO, Facts)
    assert result == Facts(facts=["The user has a cat"])
    assert len(fake_llm.requests) == 1


def test_structured_sends_json_schema_response_format(fake_llm):
    fake_llm.push('{"name": "Anne", "age": 41}')
    assert structured(fake_llm.config(), HELLO, Pair) == Pair(name="Anne", age=41)
    fmt = fake_llm.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Pair"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == json_schema(Pair)
    assert fmt["json_schema"]["schema"]["required"] == ["name", "age"]


def test_json_schema_inlines_nested_models():
    class Item(pydantic.BaseModel):
        kind: str

    class Box(pydantic.BaseModel):
        items: list[Item]

    schema = json_schema(Box)
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["properties"]["items"]["items"]["properties"] == {"kind": {"title": "Kind", "type": "string"}}
    assert schema["properties"]["items"]["items"]["additionalProperties"] is False


def test_structured_retries_once_with_the_error_then_gives_none(fake_llm):
    fake_llm.push("I cannot answer that.", '{"name": "Anne", "age": "forty-one"}')
    assert structured(fake_llm.config(), HELLO, Pair) is None
    assert len(fake_llm.requests) == 2
    retry = fake_llm.requests[1]["messages"]
    assert retry[: len(HELLO)] == HELLO
    assert retry[-2] == {"role": "assistant", "content": "I cannot answer that."}
    assert retry[-1]["role"] == "user"
    assert "no JSON object found" in retry[-1]["content"]


def test_structured_retry_quotes_the_validation_error(fake_llm):
    fake_llm.push('{"name": "Anne", "age": "forty-one"}', '{"name": "Anne", "age": 41}')
    assert structured(fake_llm.config(), HELLO, Pair) == Pair(name="Anne", age=41)
    assert "age" in fake_llm.requests[1]["messages"][-1]["content"]


def test_structured_transport_error_is_raised_not_retried(fake_llm):
    fake_llm.push({"status": 500, "body": "model crashed"})
    with pytest.raises(LLMError):
        structured(fake_llm.config(), HELLO, Pair)
    assert len(fake_llm.requests) == 1


def test_connection_refused_names_url_and_setting():
    url = refused_url()
    cfg = LLMConfig("openai/test-model", url, api_key=SECRET, timeout=5)
    start = time.monotonic()
    with pytest.raises(LLMError) as err:
        chat(cfg, HELLO)
    assert time.monotonic() - start < 3  # no retries
    message = str(err.value)
    assert url in message and "llm_base_url" in message and "refused" in message
    assert_one_clean_line(message)


def test_password_in_base_url_is_masked():
    url = refused_url().replace("http://", "http://me:hunter22@")
    with pytest.raises(LLMError) as err:
        chat(LLMConfig("openai/test-model", url), HELLO)
    assert "hunter22" not in str(err.value) and "me:***@127.0.0.1" in str(err.value)


def test_connection_refused_while_streaming():
    with pytest.raises(LLMError, match="unreachable"):
        list(chat_stream(LLMConfig("openai/test-model", refused_url()), HELLO))


def test_http_500_is_an_llm_error_with_the_reason(fake_llm):
    fake_llm.push({"status": 500, "body": {"error": {"message": "out of memory", "type": "server_error"}}})
    with pytest.raises(LLMError) as err:
        chat(fake_llm.config(api_key=SECRET), HELLO)
    message = str(err.value)
    assert fake_llm.base_url in message and "HTTP 500" in message and "out of memory" in message
    assert "llm_model" in message
    assert_one_clean_line(message)


def test_http_404_while_streaming(fake_llm):
    fake_llm.push({"status": 404, "body": {"error": {"message": "model 'test-model' not found"}}})
    with pytest.raises(LLMError, match="HTTP 404: model 'test-model' not found"):
        list(chat_stream(fake_llm.config(), HELLO))


def test_http_error_never_echoes_the_key(fake_llm):
    fake_llm.push({"status": 401, "body": f"invalid api key {SECRET}"})
    with pytest.raises(LLMError) as err:
        chat(fake_llm.config(api_key=SECRET), HELLO)
    assert "HTTP 401" in str(err.value)
    assert_one_clean_line(str(err.value))


def test_garbage_http_body_is_an_llm_error(fake_llm):
    fake_llm.push({"raw": "not json at all"})
    with pytest.raises(LLMError, match="not OpenAI-style JSON") as err:
        chat(fake_llm.config(), HELLO)
    assert_one_clean_line(str(err.value))


def test_timeout_is_an_llm_error_within_the_timeout(fake_llm):
    fake_llm.push({"delay": 10})
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"did not answer within 1s") as err:
        chat(fake_llm.config(timeout=1.0), HELLO)
    assert time.monotonic() - start < 3
    assert_one_clean_line(str(err.value))


def test_model_without_provider_prefix_names_the_setting():
    with pytest.raises(LLMError, match="llm_model"):
        chat(LLMConfig("qwen3:4b", refused_url()), HELLO)


def test_models_endpoint(fake_llm):
    import urllib.request

    with urllib.request.urlopen(fake_llm.base_url + "/models") as response:
        assert json.load(response)["data"][0]["id"] == "test-model"
