"""The memory file format: front matter, slugs, atomic writes, clear parse errors."""

from datetime import date, datetime, timezone
from pathlib import Path

import pytest
import yaml

from memvault.store import files
from memvault.errors import InvalidConversationId, MemoryFileError
from memvault.store.vault import Vault


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_round_trip_keeps_unknown_keys_and_order(tmp_path):
    memory = files.new_memory("The user's wife is named Anne", extra={"tags": ["family"], "mood": "happy"})
    path = files.write_memory(tmp_path, memory)
    assert path.relative_to(tmp_path).parts[:3] == ("entries", "global", "facts")
    assert path.name.endswith(f"__{memory.id}.md")
    read, adopted = files.read_memory(path, tmp_path)
    assert not adopted
    assert read.text == "The user's wife is named Anne"
    assert read.extra == {"tags": ["family"], "mood": "happy"}
    read.text = "The user's wife is named Anne Smith"
    files.write_memory(tmp_path, read, path)
    again, _ = files.read_memory(path, tmp_path)
    assert again.extra["mood"] == "happy" and again.text.endswith("Smith")
    assert again.created_at == memory.created_at


def test_naive_created_at_is_read_as_utc(tmp_path):
    path = write(tmp_path / "entries/global/facts/a.md",
                 "---\nid: abc\nrole: memory\ncreated_at: 2024-03-01T10:00:00\n---\nhello\n")
    memory, _ = files.read_memory(path, tmp_path)
    assert memory.created_at == datetime(2024, 3, 1, 10, tzinfo=timezone.utc)


def test_file_names_sort_by_time(tmp_path):
    early = files.new_memory("a", created_at=datetime(2020, 1, 1, tzinfo=timezone.utc))
    late = files.new_memory("b", created_at=datetime(2024, 1, 1, tzinfo=timezone.utc))
    names = sorted([files.relative_path_for(late).name, files.relative_path_for(early).name])
    assert names[0].startswith("20200101T000000000000Z__")


@pytest.mark.parametrize("hostile", ["/abs", "a/b", "x" * 300, "Ça va ☕ 你好", "a\\b", "CON", "-rf"])
def test_odd_conversation_ids_stay_inside_entries(tmp_path, hostile):
    memory = files.new_memory("text", conversation_id=hostile)
    path = files.write_memory(tmp_path, memory)
    rel = path.relative_to(tmp_path)
    assert rel.parts[0] == "entries" and len(rel.parts) == 4
    assert len(rel.parts[1]) <= 64 and "/" not in rel.parts[1]
    read, _ = files.read_memory(path, tmp_path)
    assert read.conversation_id == hostile  # the original id survives in front matter


def test_slugs_of_different_ids_differ():
    assert files.conversation_slug("a/b") != files.conversation_slug("a-b")
    assert files.conversation_slug("work") == "work"


@pytest.mark.parametrize("bad", ["../../etc", "..", "a/../b", "", "  ", "a\x00b", "tab\there", "line\nbreak"])
def test_traversal_and_control_characters_are_refused(bad):
    with pytest.raises(InvalidConversationId):
        files.conversation_slug(bad)


@pytest.mark.parametrize("content, reason", [
    ("---\nid: [unclosed\nrole: memory\n---\nx\n", "not valid YAML"),
    ("---\n- a\n- b\n---\nx\n", "not a mapping"),
    ("---\nrole: memory\ntitle: x\n---\n", "no 'id' and there is no text"),
    ("---\nid: a\nrole: memory\ncreated_at: last tuesday\n---\nx\n", "not an ISO 8601"),
    ("---\nid: a\nrole: wizard\ncreated_at: 2024-01-01\n---\nx\n", "unknown role"),
    ("---\nid: a\nrole: memory\n", "no closing"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
    (b"abc\x00def", "binary"),
    ("", "empty file"),
])
def test_unreadable_files_name_the_file_and_reason(tmp_path, content, reason):
    path = write(tmp_path / "entries/global/facts/bad.md", content)
    with pytest.raises(MemoryFileError) as excinfo:
        files.read_memory(path, tmp_path)
    assert reason in str(excinfo.value)
    assert str(path) in str(excinfo.value)


# Front matter is read and written through libyaml (PyYAML's C extension) only where that gives
# what PyYAML's pure-Python classes give; these are values on which the two disagree, or could.
TRICKY_FRONT_MATTER = [
    {"tags": ["yes", "no", "on", "~", "null", "1.0", "0x1f", "2024-01-01", "12:30", "- x", "a: b", "#c"]},
    {"tags": ["café 🙂", "漢字"], "mood": "🧠 thinking"},  # libyaml writes "\U0001F642"
    {"source": "line one\nline two\n\nafter a blank line", "note": "ends with a newline\n", "cr": "a\rb"},
    {"odd": "ends in a next-line\x85", "sep": "a line\u2028separator", "bell": "bell\x07", "bom": "\ufeffx"},
    # past 1000 columns, folded (libyaml folds quoted and multi-line values elsewhere)
    {"long": "word " * 300, "long_quoted": "a\tb " + "word " * 300, "long_lines": ("word " * 150 + "\n") * 3},
    {"": "an empty key", "k\rey": "a carriage return in a key", "k" * 130: "a long key", "ключ" * 20: "long in bytes"},
    {"day": date(2024, 1, 2), "at": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
     "nested": {"a": [1, 2.5, True, None, {"b": "c"}]}, "empty": [], "none": None},
]


@pytest.mark.parametrize("extra", TRICKY_FRONT_MATTER)
def test_front_matter_is_written_and_read_as_pyyaml_does(tmp_path, extra):
    """Byte for byte what yaml.safe_dump writes, so no file is rewritten differently; the same
    values back as yaml.safe_load gives (dates, "yes", unicode, multi-line)."""
    memory = files.new_memory("a fact", extra=extra)
    header = yaml.safe_dump(memory.front_matter(), sort_keys=False, allow_unicode=True,
                            default_flow_style=False, width=1000)
    assert files.render(memory) == f"---\n{header}---\na fact\n"
    path = files.write_memory(tmp_path, memory)
    read, _ = files.read_memory(path, tmp_path)
    expected = {k: v for k, v in yaml.safe_load(header).items() if k not in files.CORE_KEYS}
    assert read.extra == expected
    assert files.load_front_matter(header) == yaml.safe_load(header)


@pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML without libyaml")
def test_typical_memories_go_through_libyaml(tmp_path, monkeypatch):
    """The speed of a bulk add or a full reindex: the pure-Python YAML classes are for the odd file."""
    def refuse(*args, **kwargs):
        raise AssertionError("pure-Python YAML used for a typical memory")
    monkeypatch.setattr(yaml.SafeLoader, "__init__", refuse)
    monkeypatch.setattr(yaml.SafeDumper, "__init__", refuse)
    memory = files.new_memory("The user's wife is named Anne", conversation_id="conv-26",
                              extra={"tags": ["family", "naïve"], "source": "chat: 3 May", "meta": {"turn": "D1:3"}})
    path = files.write_memory(tmp_path, memory)
    assert files.read_memory(path, tmp_path)[0].extra == memory.extra


def test_a_tombstone_keeps_tags_as_they_were_written(tmp_path):
    vault = Vault(tmp_path / "v")
    vault._settings = vault.settings.replace(enable_git_versioning=False)
    with vault.change("test") as change:
        memory = change.add(files.new_memory("The user likes figs", extra={"tags": ["food 🍐", "naïve"]}))
    with vault.change("test") as change:
        change.soft_delete(memory, "user")
    text = memory.path.read_text(encoding="utf-8")
    assert "tags:\n- food 🍐\n- naïve\ndeleted_at: " in text
    assert "\\U" not in text


@pytest.mark.parametrize("header, reason", [
    ("id: a\nrole: memory: x\n", "at line 3: mapping values are not allowed here"),
    ("id: [unclosed\nrole: memory\n", "at line 3: expected ',' or ']', but got ':'"),
    ('id: "bad \\q escape"\n', "at line 2: found unknown escape character 'q'"),
    # PyYAML refuses these and libyaml reads them: still refused, as before
    ("id: a\nrole:\tmemory\n", "at line 3: found character '\\t' that cannot start any token"),
    ("id: a\nrole: memory\ntags: [what?]\n", "at line 4: expected ',' or ']', but got '?'"),
    ("id: a\nrole: memory\nnote: |#x\n", "at line 4: expected chomping or indentation indicators, but found '#'"),
])
def test_broken_front_matter_is_reported_in_the_same_words(tmp_path, header, reason):
    path = write(tmp_path / "entries/global/facts/bad.md", f"---\n{header}---\nx\n")
    with pytest.raises(MemoryFileError) as excinfo:
        files.read_memory(path, tmp_path)
    assert str(excinfo.value) == f"{path}: front matter is not valid YAML {reason}"


def test_file_without_front_matter_is_adopted_as_note_with_stable_id(tmp_path):
    path = write(tmp_path / "entries/work/notes/idea.md", "Try the new espresso place\n")
    first, adopted = files.read_memory(path, tmp_path)
    second, _ = files.read_memory(path, tmp_path)
    assert adopted and first.role == "note" and first.conversation_id == "work"
    assert first.id == second.id


def test_symlinks_are_not_followed(tmp_path):
    outside = write(tmp_path / "outside.md", "---\nid: x\nrole: memory\ncreated_at: 2024-01-01\n---\nsecret\n")
    link = tmp_path / "vault/entries/global/facts/link.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    with pytest.raises(MemoryFileError, match="symbolic link"):
        files.read_memory(link, tmp_path / "vault")


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "a" / "b.md"
    files.atomic_write(target, "one")
    files.atomic_write(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["b.md"]


def test_temp_and_editor_files_are_not_memories(tmp_path):
    folder = tmp_path / "entries/global/facts"
    for name in ["ok.md", ".ok.md.abc.tmp", ".hidden.md", "ok.md~", "#ok.md#", "notes.txt"]:
        write(folder / name, "x")
    assert [p.name for p in files.walk_entries(tmp_path)] == ["ok.md"]


def test_soft_delete_replace_and_evict(tmp_path):
    vault = Vault(tmp_path / "v")
    vault._settings = vault.settings.replace(enable_git_versioning=False)
    with vault.change("test") as change:
        old = change.add(files.new_memory("The user loves pizza", extra={"custom": 1}))
        new = change.replace(old, "The user hates pizza", reason="contradiction")
    assert old.path.parts[-3:-1] == ("deleted", "facts")
    tomb, _ = files.read_memory(old.path, vault.root)
    assert tomb.extra["replaced_by"] == new.id and tomb.extra["deleted_reason"] == "contradiction"
    assert tomb.extra["custom"] == 1 and "deleted_at" in tomb.extra
    live = list(vault.iter_memories())
    assert [m.text for m in live] == ["The user hates pizza"]
    assert live[0].extra["replaces"] == old.id

    with vault.change("test") as change:
        for day in range(1, 6):  # learned facts: memvault wrote them, so they count and may be evicted
            change.add(files.new_memory(f"fact {day}", created_at=datetime(2024, 1, day, tzinfo=timezone.utc),
                                        extra={files.ORIGIN_KEY: "learned"}))
        change.add(files.new_memory("summary", role="summary", extra={"summary_kind": "rolling"}))
        evicted = change.evict("global", max_entries=3)
    # The user's own fact (the pizza one) neither counts nor goes; summaries never do.
    assert sorted(m.text for m in evicted) == ["fact 1", "fact 2"]
    remaining = sorted(m.text for m in vault.iter_memories())
    assert remaining == ["The user hates pizza", "fact 3", "fact 4", "fact 5", "summary"]
    assert all(m.extra["deleted_reason"] == "evicted" for m in evicted)


# -- python-frontmatter ---------------------------------------------------------------------------

def test_files_are_frontmatter_posts_written_as_before(tmp_path):
    """Read through python-frontmatter (a Post), written by its dumps with memvault's handler: the
    same bytes as the layout every vault already has on disk."""
    import frontmatter

    memory = files.new_memory("The user keeps bees", extra={"tags": ["garden"]})
    text = files.render(memory)
    assert text == (f"---\nid: {memory.id}\nrole: memory\nconversation_id: global\n"
                    f"created_at: '{files.format_time(memory.created_at)}'\ntags:\n- garden\n---\nThe user keeps bees\n")
    post = files.loads(text)
    assert isinstance(post, frontmatter.Post)
    assert post.content == "The user keeps bees" and post["tags"] == ["garden"]
    assert frontmatter.dumps(post) == text


@pytest.mark.parametrize("extra", [{"content": "a key python-frontmatter's Post takes as its text"},
                                   {"handler": "x", 7: "a key that is not a string"}])
def test_keys_a_post_cannot_take_as_arguments_are_kept(tmp_path, extra):
    memory = files.new_memory("a fact", extra=extra)
    path = files.write_memory(tmp_path, memory)
    read, _ = files.read_memory(path, tmp_path)
    assert read.extra == extra and read.text == "a fact"
    files.write_memory(tmp_path, read, path)
    assert path.read_text(encoding="utf-8") == files.render(memory)


def test_a_hand_written_file_with_crlf_line_ends_keeps_its_text(tmp_path):
    """python-frontmatter's loads turns \\r\\n into \\n; the text of a file written on Windows stays as it is."""
    path = write(tmp_path / "entries/global/notes/win.md",
                 b"---\r\nid: w1\r\nrole: note\r\ncreated_at: 2024-01-01\r\n---\r\nline one\r\nline two\r\n")
    memory, adopted = files.read_memory(path, tmp_path)
    assert not adopted and memory.text == "line one\r\nline two"
