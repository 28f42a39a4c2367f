"""Java `.properties` text as Kafka reads it (java.util.Properties.load): server.properties, meta.properties and
partition.metadata all go through this one parser.

A property is `key=value`, `key: value` or `key value`; lines whose first non-blank character is `#` or `!` are
comments; a line ending in an odd number of backslashes continues on the next one (blank lines and leading
blanks skipped); `\\t`, `\\n`, `\\r`, `\\f` and `\\uXXXX` are escapes and a backslash before any other character
stands for that character (so `\\=` and `\\:` put separators in keys). Keys and values are trimmed, as Kafka's
ConfigDef trims the values it parses. A repeated key keeps its last value.
"""
from __future__ import annotations

import re
import string
from collections.abc import Iterator
from pathlib import Path

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_KEY_ENDS = "=:" + _BLANKS
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """The properties of `text`; ValueError on a malformed `\\uXXXX` escape (as Java refuses it)."""
    props = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[key.strip()] = value.strip()
    return props


def read_properties(path: str | Path) -> dict[str, str]:
    """The properties of a UTF-8 file; OSError if it cannot be read, ValueError if it is malformed."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def _logical_lines(text: str) -> Iterator[str]:
    parts: list[str] = []  # a line continued by trailing backslashes, so far
    for natural in _LINE_BREAK.split(text):
        line = natural.lstrip(_BLANKS)
        if not line or (not parts and line[0] in "#!"):
            continue
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        parts.append(line[:-1] if continued else line)
        if not continued:
            yield "".join(parts)
            parts = []
    if parts:
        yield "".join(parts)


def _split(line: str) -> tuple[str, str]:
    """Key and value of a logical line: the key ends at the first unescaped separator or blank."""
    end = 0
    while end < len(line) and line[end] not in _KEY_ENDS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    start = end
    while start < len(line) and line[start] in _BLANKS:
        start += 1
    if start < len(line) and line[start] in "=:":
        start += 1
    while start < len(line) and line[start] in _BLANKS:
        start += 1
    return _unescape(line[:end]), _unescape(line[start:])


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char != "\\":
            out.append(char)
        elif pos == len(text):
            break  # a lone trailing backslash stands for nothing
        elif text[pos] == "u":
            digits = text[pos + 1:pos + 5]
            if len(digits) < 4 or any(d not in string.hexdigits for d in digits):
                raise ValueError(f"Malformed \\uxxxx encoding in {text!r}")
            out.append(chr(int(digits, 16)))
            pos += 5
        else:
            out.append(_ESCAPES.get(text[pos], text[pos]))
            pos += 1
    return "".join(out)
