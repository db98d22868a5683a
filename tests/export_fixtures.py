"""Chat exports in the shapes ChatGPT and Claude write them, for the import tests.

The shapes follow the exports themselves (as peers' importers read them, e.g. basic-memory's
chatgpt_importer.py and claude_conversations_importer.py):

- ChatGPT `conversations.json`: a list of conversations {title, create_time, update_time, mapping,
  current_node, conversation_id, id, ...}; `mapping` holds every node {id, message, parent,
  children}; a message has {id, author: {role, name, metadata}, create_time, content:
  {content_type, parts}, status, end_turn, weight, metadata, recipient}. The root node has no
  message; a hidden system message follows it; regenerations are sibling branches, and the path
  to `current_node` is what the user saw.
- Claude `conversations.json`: a list of {uuid, name, summary, created_at, updated_at, account,
  chat_messages}; a message has {uuid, text, content: [{type, text, ...}], sender (human or
  assistant), created_at, updated_at, attachments, files}.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def chatgpt_message(node_id: str, role: str, text: str | None, when: float | None, *, content_type: str = "text",
                    parts: list | None = None, metadata: dict | None = None, recipient: str = "all") -> dict:
    content: dict[str, Any] = {"content_type": content_type}
    if content_type in ("text", "multimodal_text"):
        content["parts"] = parts if parts is not None else [text]
    else:
        content["text"] = text
    return {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": when,
            "update_time": None, "content": content, "status": "finished_successfully", "end_turn": True,
            "weight": 1.0, "metadata": metadata or {}, "recipient": recipient}


def chatgpt_conversation(conversation_id: str, title: str, turns: list[tuple[str, str]], start: float = START, *,
                         regenerated: bool = False, tools: bool = False) -> dict:
    """A conversation whose visible path is `turns` ((role, text), alternating user/assistant), with
    the root, a hidden system message, the user's custom instructions, and optionally a regenerated
    reply (an abandoned sibling of the first reply) and a tool call with its result."""
    mapping: dict[str, dict] = {}

    def add(node_id: str, parent: str | None, message: dict | None) -> None:
        mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        if parent is not None:
            mapping[parent]["children"].append(node_id)

    add(f"{conversation_id}-root", None, None)
    add(f"{conversation_id}-sys", f"{conversation_id}-root",
        chatgpt_message(f"{conversation_id}-sys", "system", "", None,
                        metadata={"is_visually_hidden_from_conversation": True}))
    add(f"{conversation_id}-ctx", f"{conversation_id}-sys",
        chatgpt_message(f"{conversation_id}-ctx", "user", "Call me Sam.", start - 1,
                        content_type="user_editable_context", metadata={"is_visually_hidden_from_conversation": True}))
    parent = f"{conversation_id}-ctx"
    for number, (role, text) in enumerate(turns):
        node_id = f"{conversation_id}-m{number}"
        when = start + 10 * number + 0.25
        if tools and role == "assistant" and number == 1:
            add(f"{node_id}-call", parent, chatgpt_message(f"{node_id}-call", "assistant", "print(2 + 2)", when - 2,
                                                           content_type="code", recipient="python"))
            add(f"{node_id}-out", f"{node_id}-call", chatgpt_message(f"{node_id}-out", "tool", "4", when - 1,
                                                                     content_type="execution_output"))
            parent = f"{node_id}-out"
        if regenerated and role == "assistant" and number == 1:
            add(f"{node_id}-old", parent, chatgpt_message(f"{node_id}-old", "assistant", "A reply the user "
                                                          "regenerated", when - 5))
        add(node_id, parent, chatgpt_message(node_id, role, text, when))
        parent = node_id
    return {"title": title, "create_time": start, "update_time": start + 10 * len(turns), "mapping": mapping,
            "moderation_results": [], "current_node": parent, "plugin_ids": None, "conversation_id": conversation_id,
            "conversation_template_id": None, "gizmo_id": None, "is_archived": False, "safe_urls": [],
            "default_model_slug": "gpt-4o", "id": conversation_id}


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def claude_conversation(uuid: str, name: str, turns: list[tuple[str, str]], start: float = START, *,
                        text_in_content: bool = True) -> dict:
    messages = []
    for number, (role, text) in enumerate(turns):
        when = iso(start + 10 * number)
        message = {"uuid": f"{uuid}-m{number}", "text": text, "sender": "human" if role == "user" else "assistant",
                   "created_at": when, "updated_at": when, "attachments": [], "files": []}
        if text_in_content:
            message["text"] = ""  # newer exports: the text lives in content
            message["content"] = [{"start_timestamp": when, "stop_timestamp": when, "type": "text", "text": text,
                                   "citations": []}]
        messages.append(message)
    return {"uuid": uuid, "name": name, "summary": "", "created_at": iso(start), "updated_at": iso(start + 100),
            "account": {"uuid": "account-1"}, "chat_messages": messages}


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


TRIP = [("user", "I am planning a trip to Lisbon in May."), ("assistant", "Lisbon in May is lovely."),
        ("user", "My wife Anne loves pastel de nata."), ("assistant", "Then visit Belem.")]
WORK = [("user", "I work as a nurse in Porto."), ("assistant", "That sounds demanding.")]


def later(seconds: float, days: int) -> float:
    return seconds + timedelta(days=days).total_seconds()
