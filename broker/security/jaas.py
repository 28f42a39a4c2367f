"""Kafka's `sasl.jaas.config` (JaasConfig): login modules, each with a control flag and options.

A value is read with the tokenizer Kafka reads it with (java.io.StreamTokenizer, `//` and `/* */` comments on, `-`,
`_` and `$` word characters), so it means here what it means to Kafka, quirks included: a bare token starting with a
digit, `.` or `-` is a number, not a value (quote it); a lone `/` starts a comment to the end of the line; a quoted
value ends at its closing quote or at the end of its line; single quotes quote too.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_FLAGS_BY_UPPER_CASE = {flag.upper(): flag for flag in CONTROL_FLAGS}


@dataclass(frozen=True)
class JaasLoginModule:
    class_name: str
    flag: str  # one of CONTROL_FLAGS, lower case whatever case the value spelled it in
    options: Mapping[str, str]


def parse_jaas_config(value: str, property_name: str) -> list[JaasLoginModule]:
    """The login modules of a `sasl.jaas.config` value, in order; ConfigError naming `property_name` for a value
    Kafka refuses. The value itself is never quoted in an error: it holds passwords."""
    tokens = _Tokenizer(value)
    modules = []
    token = tokens.next_token()
    while token.kind != _EOF:
        modules.append(_parse_entry(token, tokens, property_name))
        token = tokens.next_token()
    if not modules:
        raise _error(property_name, "Login module not specified in JAAS config")
    return modules


def _parse_entry(first: _Token, tokens: _Tokenizer, property_name: str) -> JaasLoginModule:
    flag_token = tokens.next_token()
    if flag_token.kind == _EOF:
        raise _error(property_name, "Login module control flag not specified in JAAS config")
    if flag_token.text is None:
        raise _error(property_name, "Login module control flag is not available in the JAAS config")
    flag = _FLAGS_BY_UPPER_CASE.get(flag_token.text.upper())  # Kafka's toUpperCase(Locale.ROOT): "requıred" is one
    if flag is None:
        raise _error(property_name, f"Invalid login module control flag '{flag_token.text}' in JAAS config")
    options: dict[str, str] = {}
    token = tokens.next_token()
    while token.kind not in (_EOF, ";"):
        key = token.text
        equals = tokens.next_token()
        value = tokens.next_token().text if equals.kind == "=" else None
        if value is None:
            name = "null" if key is None else key  # as Java prints a missing name
            raise _error(property_name, f"Value not specified for key '{name}' in JAAS config")
        if key is not None:  # Kafka keeps an option named by a number or a symbol under null, where none reads it
            options[key] = value
        token = tokens.next_token()
    if token.kind != ";":
        raise _error(property_name, "JAAS config entry not terminated by semi-colon")
    if not first.text:
        raise _error(property_name, "Login module not specified in JAAS config")
    return JaasLoginModule(first.text, flag, options)


def _error(property_name: str, message: str) -> ConfigError:
    return ConfigError(f"Invalid value for configuration {property_name}: {message}")


# Token kinds; any other kind is an ordinary character, the token itself (`;`, `=`, ...).
_WORD = "word"
_QUOTED = "quoted"
_NUMBER = "number"
_EOF = "eof"

_NUMBER_CHARS = "0123456789.-"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str | None = None  # a word's or a quoted string's text (StreamTokenizer's sval); None for the others


def _is_word_char(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z" or ord(c) >= 0xA0 or c in "-_$"


class _Tokenizer:
    """java.io.StreamTokenizer as JaasConfig sets it up."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def next_token(self) -> _Token:
        text, n = self._text, len(self._text)
        while True:
            while self._pos < n and ord(text[self._pos]) <= 32:
                self._pos += 1
            if self._pos >= n:
                return _Token(_EOF)
            start = self._pos
            c = text[start]
            if c in _NUMBER_CHARS:
                return self._number()
            if _is_word_char(c):
                self._pos += 1
                while self._pos < n and (_is_word_char(text[self._pos]) or text[self._pos] in _NUMBER_CHARS):
                    self._pos += 1
                return _Token(_WORD, text[start:self._pos])
            if c in "\"'":
                return self._quoted(c)
            if c == "/":
                if text.startswith("/*", start):
                    end = text.find("*/", start + 2)
                    if end < 0:
                        self._pos = n
                        return _Token(_EOF)
                    self._pos = end + 2
                else:
                    # `//`, and a lone `/` too: the character after the slash is taken whatever it is (a line break
                    # included), then the rest of the line.
                    self._pos = start + 2
                    while self._pos < n and text[self._pos] not in "\n\r":
                        self._pos += 1
                continue
            self._pos += 1
            return _Token(c)

    def _number(self) -> _Token:
        text, n = self._text, len(self._text)
        if text[self._pos] == "-":
            self._pos += 1
            if self._pos >= n or text[self._pos] not in "0123456789.":
                return _Token("-")
        seen_dot = False
        while self._pos < n and ("0" <= text[self._pos] <= "9" or text[self._pos] == "." and not seen_dot):
            seen_dot = seen_dot or text[self._pos] == "."
            self._pos += 1
        return _Token(_NUMBER)

    def _quoted(self, quote: str) -> _Token:
        text, n = self._text, len(self._text)
        self._pos += 1
        out = []
        while self._pos < n and text[self._pos] not in (quote, "\n", "\r"):
            c = text[self._pos]
            self._pos += 1
            if c != "\\":
                out.append(c)
                continue
            if self._pos >= n:
                out.append("\uffff")  # Java's tokenizer takes the end after a backslash as U+FFFF
                break
            c = text[self._pos]
            self._pos += 1
            if "0" <= c <= "7":
                # Octal, up to \377.
                code = int(c)
                for digits in range(2):
                    if self._pos < n and "0" <= text[self._pos] <= "7" and (digits == 0 or c <= "3"):
                        code = code * 8 + int(text[self._pos])
                        self._pos += 1
                    else:
                        break
                out.append(chr(code))
            else:
                out.append(_ESCAPES.get(c, c))
        if self._pos < n and text[self._pos] == quote:
            self._pos += 1
        return _Token(_QUOTED, "".join(out))
