"""`memvault serve`'s Anthropic Messages face (issue 42): a real server process, spoken to by the official
`anthropic` package (streamed and not, tools, system as a string and as blocks, errors), in front of a
scripted Anthropic upstream (tests/fake_anthropic.py, a real HTTP server: anthropic_base_url), the
learning done by the scripted OpenAI-protocol LLM of the settings (tests/fake_llm.py); the vault is
real files, git and LanceDB. The tests that start a server of their own (a serve key; the real `claude`
CLI, end to end) are in the slow step.

One server for the module (it takes seconds to start), each test in a conversation of its own (the
X-Memvault-Conversation header), waiting for it to be idle before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO, stop_process
from fake_anthropic import FakeAnthropic, request_text
from fake_llm import FakeLLM
from test_serve import NOTHING_LEARNED, facts, memories_of, server_env, serving, subjects

anthropic = pytest.importorskip("anthropic")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-anthropic")
    llm, upstream = FakeLLM(), FakeAnthropic()
    llm.default = NOTHING_LEARNED  # what the upkeep asks, unless a test scripted more
    env = server_env(root, llm.base_url, anthropic_base_url=upstream.base_url)
    try:
        with serving("-c", "anthropic-default", env=env) as server:
            server.fake, server.upstream = llm, upstream
            yield server
    finally:
        llm.close()
        upstream.close()
    assert not upstream.unscripted, "fake_anthropic got a request with no scripted reply"


@pytest.fixture
def proxy(shared):
    shared.idle()
    yield shared
    shared.idle()


def client(server, conversation: str | None = None, **options) -> "anthropic.Anthropic":
    headers = {"X-Memvault-Conversation": conversation} if conversation else {}
    return anthropic.Anthropic(base_url=server.url, api_key=options.pop("api_key", "sk-test"), max_retries=0,
                               timeout=120, default_headers=headers, **options)


def test_a_fact_told_is_injected_as_one_more_system_block_and_the_exchange_stored_and_found(proxy):
    llm, upstream, vault = proxy.fake, proxy.upstream, proxy.vault
    talk = client(proxy, "anne")
    llm.push(facts("The user's wife is named Anne"))  # what the upkeep learns from the first message
    upstream.push("Nice to hear.")
    first = talk.messages.create(model="claude-test-1", max_tokens=100, system="You are terse.",
                                 messages=[{"role": "user", "content": "My wife is Anne."}],
                                 extra_headers={"anthropic-beta": "prompt-caching-2024-07-31"})
    assert first.content[0].text == "Nice to hear." and first.stop_reason == "end_turn"
    assert first.id.startswith("msg_fake_")  # the upstream's answer, as it came
    sent, headers = upstream.requests[-1], upstream.headers[-1]
    assert sent["system"] == "You are terse."  # nothing known yet: nothing added
    own = {k.lower(): v for k, v in talk.default_headers.items() if isinstance(v, str)}  # what the SDK sends
    for name in ("anthropic-version", "user-agent", "x-stainless-lang"):
        assert headers[name] == own[name], name
    assert "sk-test" in (headers["x-api-key"] or headers["authorization"])  # the client's key, as it came
    assert headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert "x-memvault-conversation" not in {k.lower() for k in headers.keys()}  # memvault's own: not passed on
    proxy.idle()  # the upkeep ran after the response: the fact is learned
    assert [f.text for f in memories_of(vault, "anne", "facts")] == ["The user's wife is named Anne"]

    # Streamed, the system prompt as blocks (claude's way, with cache_control): the client's blocks go as
    # they came, the memories one more block after them.
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    asked = [{"role": "user", "content": "My wife is Anne."}, {"role": "assistant", "content": "Nice to hear."},
             {"role": "user", "content": [{"type": "text", "text": "What is my wife's name?"}]}]
    upstream.push({"chunks": ["Your wife", " is Anne."]})
    with talk.messages.stream(model="claude-test-1", max_tokens=100, system=system, messages=asked) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert pieces == ["Your wife", " is Anne."] and final.content[0].text == "Your wife is Anne."
    sent = upstream.requests[-1]
    assert sent["stream"] is True and sent["messages"] == asked and sent["system"][:1] == system
    [block] = sent["system"][1:]
    assert block["type"] == "text" and "The user's wife is named Anne" in block["text"]
    assert "Anne" in request_text(sent)
    proxy.idle()
    users = [t.text for t in memories_of(vault, "anne", "turns/user")]
    replies = [t.text for t in memories_of(vault, "anne", "turns/assistant")]
    assert users == ["My wife is Anne.", "What is my wife's name?"]
    assert replies == ["Nice to hear.", "Your wife is Anne."]
    assert "memvault chat: exchange (anne)" in subjects(vault)  # committed
    found = proxy.http("POST", "/v1/memories/search", json={"query": "What is my wife's name?",
                                                            "conversation_id": "anne"}).json()
    assert "Your wife is Anne." in [r["text"] for r in found]


def test_images_and_reminders_go_to_the_model_and_only_the_users_words_are_stored(proxy):
    upstream, vault = proxy.upstream, proxy.vault
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    content = [{"type": "text", "text": "<system-reminder>\nThe date is today.\n</system-reminder>"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": pixel}},
               {"type": "text", "text": "What colour is this pixel?"}]
    upstream.push("Red.")
    answer = client(proxy, "images").messages.create(model="claude-test-1", max_tokens=10,
                                                     messages=[{"role": "user", "content": content}])
    assert answer.content[0].text == "Red."
    assert upstream.requests[-1]["messages"] == [{"role": "user", "content": content}]  # as the client sent it
    proxy.idle()
    [user] = memories_of(vault, "images", "turns/user")
    assert user.text == "What colour is this pixel?"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_tool_round_is_one_message_with_one_reply(proxy, streamed):
    upstream, vault = proxy.upstream, proxy.vault
    conversation = f"tools-{streamed}"
    talk = client(proxy, conversation)
    tools = [{"name": "weather", "description": "The weather in a city.",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    asked = [{"role": "user", "content": "What is the weather in Oslo?"}]

    def ask(messages):
        if not streamed:
            return talk.messages.create(model="claude-test-1", max_tokens=100, tools=tools, messages=messages)
        with talk.messages.stream(model="claude-test-1", max_tokens=100, tools=tools, messages=messages) as stream:
            return stream.get_final_message()

    upstream.push({"tool_use": [{"name": "weather", "input": {"city": "Oslo"}, "id": "toolu_1"}]})
    called = ask(asked)
    [use] = [b for b in called.content if b.type == "tool_use"]
    assert (use.name, use.input, called.stop_reason) == ("weather", {"city": "Oslo"}, "tool_use")
    assert upstream.requests[-1]["tools"] == tools
    proxy.idle()
    upstream.push("It is sunny in Oslo.")
    rounds = [*asked, {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
    answer = ask(rounds)
    assert answer.content[0].text == "It is sunny in Oslo."
    assert upstream.requests[-1]["messages"] == rounds  # the tool round as the client sent it
    proxy.idle()
    [user] = memories_of(vault, conversation, "turns/user")
    [reply] = memories_of(vault, conversation, "turns/assistant")
    assert user.text == "What is the weather in Oslo?" and reply.text == "It is sunny in Oslo."
    assert reply.extra["tool_calls"] == [{"name": "weather", "arguments": json.dumps({"city": "Oslo"})}]


def test_the_upstreams_errors_reach_the_client_as_it_sent_them(proxy):
    upstream, vault = proxy.upstream, proxy.vault
    talk = client(proxy, "errors")
    asked = [{"role": "user", "content": "Hello?"}]
    upstream.push({"status": 429, "body": {"type": "error", "error": {"type": "rate_limit_error",
                                                                       "message": "slow down"}}})
    with pytest.raises(anthropic.RateLimitError) as limited:
        talk.messages.create(model="claude-test-1", max_tokens=10, messages=asked)
    assert limited.value.status_code == 429 and limited.value.body["error"]["message"] == "slow down"
    assert limited.value.response.headers["request-id"] == "req_fake"  # the upstream's headers too
    upstream.push({"status": 529})
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        with talk.messages.stream(model="claude-test-1", max_tokens=10, messages=asked) as stream:
            list(stream.text_stream)
    assert overloaded.value.status_code == 529 and overloaded.value.body["error"]["type"] == "overloaded_error"
    # Mid-stream: the upstream's own error event, as it came.
    upstream.push({"chunks": ["Hel"], "error_event": {"type": "overloaded_error", "message": "gave up"}})
    with pytest.raises(anthropic.APIStatusError) as gave_up:
        with talk.messages.stream(model="claude-test-1", max_tokens=10, messages=asked) as stream:
            list(stream.text_stream)
    assert "gave up" in str(gave_up.value)
    # An upstream that dies mid-reply: memvault's error event, in Anthropic's shape, says so.
    upstream.push({"chunks": ["Hel"], "cut": True})
    with pytest.raises(anthropic.APIStatusError) as cut:
        with talk.messages.stream(model="claude-test-1", max_tokens=10, messages=asked) as stream:
            list(stream.text_stream)
    assert "broke off its reply mid-stream" in str(cut.value) and "anthropic_base_url" in str(cut.value)
    proxy.idle()
    # The message is kept once, unanswered: the upstream failed to answer it (as the OpenAI face keeps it).
    [user] = memories_of(vault, "errors", "turns/user")
    assert user.text == "Hello?" and user.extra["unanswered"] is True
    assert memories_of(vault, "errors", "turns/assistant") == []

    # memvault's own refusals, in Anthropic's shape: the SDK raises them as such.
    with pytest.raises(anthropic.BadRequestError) as refused:
        talk.messages.create(model="claude-test-1", max_tokens=10,
                             messages=[{"role": "assistant", "content": "I start."}])
    assert refused.value.body["type"] == "error"
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert "no user message with text" in refused.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as bad_header:
        client(proxy, "../up").messages.create(model="claude-test-1", max_tokens=10, messages=asked)
    assert "X-Memvault-Conversation" in bad_header.value.body["error"]["message"]


def test_count_tokens_and_the_model_list_are_the_upstreams(proxy):
    upstream = proxy.upstream
    talk = client(proxy)
    counted = talk.messages.count_tokens(model="claude-test-1", messages=[{"role": "user", "content": "Hi there"}])
    assert counted.input_tokens > 0
    assert upstream.count_requests[-1]["messages"] == [{"role": "user", "content": "Hi there"}]
    assert [m.id for m in talk.models.list()] == ["claude-test-1"]
    assert talk.models.retrieve("claude-test-1").id == "claude-test-1"
    # Without anthropic-version it is OpenAI's model list (the LLM of the settings).
    assert proxy.http("GET", "/v1/models").json()["object"] == "list"


@pytest.mark.slow  # a server of its own
def test_with_a_serve_key_the_client_sends_it_as_its_api_key_and_memvaults_anthropic_key_goes_on(tmp_path):
    """MEMVAULT_SERVE_API_KEY set: an Anthropic client authenticates with it (x-api-key), which stays here;
    the upstream gets anthropic_api_key. A wrong key: 401 in Anthropic's shape."""
    llm, upstream = FakeLLM(), FakeAnthropic()
    llm.default = NOTHING_LEARNED
    env = server_env(tmp_path, llm.base_url, anthropic_base_url=upstream.base_url, serve_api_key="serve-secret",
                     anthropic_api_key="sk-ant-memvault")
    try:
        with serving(env=env) as server:
            upstream.push("Hi.", "Hi again.")
            answer = client(server, api_key="serve-secret").messages.create(
                model="claude-test-1", max_tokens=10, messages=[{"role": "user", "content": "Hello"}])
            assert answer.content[0].text == "Hi."
            # As claude sends ANTHROPIC_API_KEY: x-api-key.
            again = server.http("POST", "/v1/messages", headers={"x-api-key": "serve-secret", "anthropic-version":
                                                                 "2023-06-01"},
                                json={"model": "claude-test-1", "max_tokens": 10,
                                      "messages": [{"role": "user", "content": "Hello again"}]})
            assert again.status_code == 200 and again.json()["content"][0]["text"] == "Hi again."
            for sent in upstream.headers[-2:]:
                assert sent["x-api-key"] == "sk-ant-memvault" and "serve-secret" not in str(sent.items())
            with pytest.raises(anthropic.AuthenticationError) as refused:
                client(server, api_key="wrong").messages.create(model="claude-test-1", max_tokens=10,
                                                                messages=[{"role": "user", "content": "Hello"}])
            assert refused.value.body["error"]["type"] == "authentication_error"
            server.idle()
    finally:
        llm.close()
        upstream.close()


# -- the real `claude` CLI (slow) -----------------------------------------------------------------------

GIVEN_CLAUDE = os.environ.get("MEMVAULT_TEST_CLAUDE")  # read at import: each test runs without MEMVAULT_* (conftest)


def claude_command() -> str | None:
    """MEMVAULT_TEST_CLAUDE, else the one .ci/run installs into .pytest_cache/claude-code, else `claude` on PATH."""
    if GIVEN_CLAUDE:
        return GIVEN_CLAUDE
    local = REPO / ".pytest_cache" / "claude-code" / "node_modules" / ".bin" / "claude"
    return str(local) if local.exists() else shutil.which("claude")


@pytest.mark.slow
def test_claude_code_remembers_a_fact_across_two_sessions_through_the_proxy(tmp_path):
    """`claude -p` twice with ANTHROPIC_BASE_URL at memvault serve: session 1 states a fact, session 2 asks
    about it; session 2's request to the upstream holds the memory, the vault session 1's exchange."""
    claude = claude_command()
    if claude is None:
        pytest.skip("the `claude` CLI is not installed: .ci/run installs it into .pytest_cache/claude-code with npm "
                    "(or set MEMVAULT_TEST_CLAUDE)")
    llm, upstream = FakeLLM(), FakeAnthropic()
    llm.default = NOTHING_LEARNED
    llm.push(facts("The user's cat is named Miso"))
    said = iter(["Noted: your cat is Miso."])
    upstream.default = lambda body: next(said, "Your cat is named Miso.")  # claude's requests: not countable
    env = server_env(tmp_path, llm.base_url, anthropic_base_url=upstream.base_url)
    try:
        with serving("-c", "claude-project", env=env) as server:
            home = tmp_path / "claude-home"
            home.mkdir()
            work = tmp_path / "work"
            work.mkdir()
            claude_env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": server.url,
                          "ANTHROPIC_API_KEY": "sk-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                          "DISABLE_AUTOUPDATER": "1"}
            for prompt in ("Remember this: my cat is named Miso.", "What is my cat's name?"):
                before = len(upstream.requests)
                proc = subprocess.Popen([claude, "-p", prompt], cwd=work, env=claude_env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    out, err = proc.communicate(timeout=180)
                finally:
                    stop_process(proc)
                assert proc.returncode == 0, err[-2000:]
                assert len(upstream.requests) > before, "claude sent nothing through the proxy"
                server.idle()
            assert "Miso" in out
            asked = [b for b in upstream.requests if "What is my cat's name?" in request_text(b)]
            assert asked and "The user's cat is named Miso" in json.dumps(asked[-1]["system"])
            users = [t.text for t in memories_of(server.vault, "claude-project", "turns/user")]
            # The user's words alone: claude's <system-reminder> blocks and its system messages are not.
            assert users == ["Remember this: my cat is named Miso.", "What is my cat's name?"]
            replies = [t.text for t in memories_of(server.vault, "claude-project", "turns/assistant")]
            assert "Noted: your cat is Miso." in replies
    finally:
        llm.close()
        upstream.close()


@pytest.mark.slow  # a server of its own
def test_with_anthropic_upstream_litellm_any_model_answers_an_anthropic_client(tmp_path):
    """anthropic_upstream = litellm: the Anthropic client's request goes to the LLM of the settings (an
    OpenAI-protocol endpoint here, tests/fake_llm.py), translated by litellm, the memory block among its
    system text; the answer comes back in Anthropic's shape, streamed and not, and the exchange is stored."""
    llm = FakeLLM()
    llm.default = NOTHING_LEARNED
    env = server_env(tmp_path, llm.base_url, anthropic_upstream="litellm",
                     anthropic_base_url="http://127.0.0.1:9")  # never asked: a request there would fail
    try:
        with serving("-c", "translated", env=env) as server:
            server.fake = llm
            assert server.http("POST", "/v1/memories", json={"text": "The user's sister Lena lives in Lisbon",
                                                              "conversation_id": "translated"}).status_code == 200
            talk = client(server)
            llm.push("She lives in Lisbon.")
            answer = talk.messages.create(model="claude-sonnet-4-6", max_tokens=64, system="You are terse.",
                                          messages=[{"role": "user", "content": "Where does my sister Lena live?"}])
            assert answer.type == "message" and answer.content[0].text == "She lives in Lisbon."
            [sent] = [r for r in llm.requests if "Where does my sister Lena live?" in json.dumps(r)]
            assert sent["model"] == "test-model" and sent["max_tokens"] == 64  # llm_model, the client's limit
            system = " ".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                              for m in sent["messages"] if m["role"] == "system")
            assert "You are terse." in system and "Lena lives in Lisbon" in system  # the client's, then the block

            server.idle()
            llm.push({"chunks": ["Lena is", " in Lisbon."]})
            with talk.messages.stream(model="claude-sonnet-4-6", max_tokens=64,
                                      messages=[{"role": "user", "content": "And Lena's city again?"}]) as stream:
                pieces = "".join(stream.text_stream)
                final = stream.get_final_message()
            assert pieces == "Lena is in Lisbon." and final.content[0].text == "Lena is in Lisbon."
            assert talk.messages.count_tokens(model="claude-sonnet-4-6", messages=[
                {"role": "user", "content": "Hi there"}]).input_tokens > 0
            assert [m.id for m in talk.models.list()] == ["openai/test-model"]

            server.idle()  # the upkeep asked what it asks: the next scripted answer is the chat's
            llm.push({"status": 500})
            with pytest.raises(anthropic.APIStatusError) as down:  # the LLM fails: Anthropic's error shape
                talk.messages.create(model="claude-sonnet-4-6", max_tokens=8,
                                     messages=[{"role": "user", "content": "Anything?"}])
            assert down.value.status_code >= 500 and down.value.body["type"] == "error"
            server.idle()
            users = [t.text for t in memories_of(server.vault, "translated", "turns/user")]
            replies = [t.text for t in memories_of(server.vault, "translated", "turns/assistant")]
            assert users[:2] == ["Where does my sister Lena live?", "And Lena's city again?"]
            assert replies[:2] == ["She lives in Lisbon.", "Lena is in Lisbon."]
    finally:
        llm.close()
