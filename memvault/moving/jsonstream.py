"""A JSON array read one element at a time, in memory bounded by its largest element.

Chat exports are one JSON array of conversations, and a years-long history makes it hundreds of
megabytes; `json.load` would hold all of it, and its Python objects, at once. The standard library
has no streaming parser, so this reads the file in chunks and hands each element to the C decoder
(`json.JSONDecoder.raw_decode`) as soon as the buffer holds all of it. An element cut by the end of
the buffer fails to decode: then more is read, twice as much each time, so that a large element
costs a few decodes, not one per chunk. Only what a chunk boundary can cause counts as "cut": the
end of the buffer inside a string, or an error within the last bytes of the buffer. Anything else
is invalid JSON, said at once, without reading the rest of the file.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

CHUNK = 1 << 20
# An error this close to the end of the buffer may be a literal, number or escape cut in two.
_CUT_MARGIN = 8
_WHITESPACE = " \t\n\r"


class JSONStreamError(ValueError):
    """What is wrong with the file: `kind` is "not-json", "not-array", "truncated" or "invalid";
    `count` is how many elements were read before it."""

    def __init__(self, kind: str, detail: str, count: int):
        self.kind, self.detail, self.count = kind, detail, count
        super().__init__(detail)


@dataclass
class _Buffer:
    handle: BinaryIO
    text: str = ""
    pos: int = 0
    eof: bool = False
    bytes_read: int = 0
    want: int = CHUNK

    def __post_init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def more(self, count: int) -> bool:
        """Read at least one more chunk (more when an element needs it); False at the end."""
        if self.eof:
            return False
        data = self.handle.read(self.want)
        try:
            decoded = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise JSONStreamError("not-json", f"is not UTF-8 text (byte {self.bytes_read + exc.start})",
                                  count) from None
        self.bytes_read += len(data)
        self.text = self.text[self.pos:] + decoded  # what was decoded already is let go of
        self.pos = 0
        if not data:
            self.eof = True
        return True

    def skip_space(self, count: int) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.more(count):
                return ""


def iter_array(path: Path, progress: Callable[[int, int], None] | None = None) -> Iterator[Any]:
    """The elements of the JSON array in `path`, in order. Raises JSONStreamError (after yielding
    the elements before the problem) for a file that is not a JSON array, is cut short, or holds
    invalid JSON. progress(bytes read, file size) is called after each element."""
    with open(path, "rb") as handle:
        size = _size(handle)
        yield from _elements(_Buffer(handle), size, progress)


def _size(handle: BinaryIO) -> int:
    try:
        import os

        return os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return 0


def _elements(buf: _Buffer, size: int, progress) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    count = 0
    first = buf.skip_space(count)
    if first == "\ufeff":  # a byte order mark
        buf.pos += 1
        first = buf.skip_space(count)
    if first != "[":
        what = {"": "is empty", "{": "is a JSON object, not an array"}.get(first, "is not JSON (it does not start "
                                                                                   "with '[')")
        raise JSONStreamError("not-array" if first == "{" else "not-json", what, count)
    buf.pos += 1
    while True:
        char = buf.skip_space(count)
        if char == "]":
            buf.pos += 1
            if buf.skip_space(count):
                raise JSONStreamError("invalid", f"has data after the end of the array (after element {count})",
                                      count)
            return
        if char == "":
            raise JSONStreamError("truncated", f"ends after element {count}, before the array is closed", count)
        if count:
            if char != ",":
                _raise_at(buf, count, "expected ',' or ']' between elements")
            buf.pos += 1
            char = buf.skip_space(count)
        if char == "":
            raise JSONStreamError("truncated", f"ends after element {count}, before the array is closed", count)
        element = _decode_one(decoder, buf, count)
        count += 1
        yield element
        if progress is not None:
            progress(buf.bytes_read, size)


def _decode_one(decoder: json.JSONDecoder, buf: _Buffer, count: int) -> Any:
    """One element from the buffer, reading more while it is cut by the buffer's end."""
    buf.want = CHUNK
    while True:
        try:
            value, end = decoder.raw_decode(buf.text, buf.pos)
        except json.JSONDecodeError as exc:
            cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(buf.text) - _CUT_MARGIN
            if cut and buf.more(count):
                buf.want = max(buf.want * 2, len(buf.text) - buf.pos)
                continue
            if cut:
                raise JSONStreamError("truncated", f"is cut short inside element {count + 1} (a file that was not "
                                      "copied or downloaded whole?)", count) from None
            raise JSONStreamError("invalid", f"is not valid JSON in element {count + 1} ({exc.msg})", count) from None
        if end == len(buf.text) and not buf.eof:
            # A number may go on in the next chunk; anything else ends with its closing character.
            if buf.more(count):
                continue
        buf.pos = end
        return value


def _raise_at(buf: _Buffer, count: int, what: str) -> None:
    raise JSONStreamError("invalid", f"is not valid JSON after element {count} ({what})", count)
