"""Kafka's SslPrincipalMapper: `ssl.principal.mapping.rules` turn a client certificate's distinguished name into the
name of its principal.

The rules are a comma-separated list of `RULE:pattern/replacement/` (an optional `L` or `U` after the last slash
lower- or upper-cases the result) and `DEFAULT` (the name unchanged); the first rule whose pattern matches the whole
name gives it. They are split and parsed with Kafka's own regular expressions, so a backslash escapes a slash or a
comma inside a rule as it does in Kafka.

Patterns are Python regular expressions, in ASCII mode as Java's are by default: Java's common syntax reads the same,
but a named group is written `(?P<name>...)` and Java's `\\p{...}` classes and `\\Q...\\E` quoting are refused. A
replacement is read as Java's Matcher does: `$n` and `${name}` name groups, a backslash makes the next character
literal, and, as Kafka intends, a `$n` naming a group the pattern lacks is literal text (Kafka itself fails from the
second such reference on). Replacements Java would only reject when the rule matches (a group reference in a pattern
without groups, `$` followed by neither digit nor `{`, an unknown group name) are refused here with the rules.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass

from minikafka.config import ConfigError

RULES_CONFIG = "ssl.principal.mapping.rules"

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)", re.ASCII)
_RULE_PARSER = re.compile(_RULE_PATTERN, re.ASCII)
# Java's String.trim(): every character up to the space.
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))


class NoMatchingRule(ValueError):
    """No rule gives a name to the distinguished name (Kafka's SslPrincipalMapper.NoMatchingRule)."""


@dataclass(frozen=True)
class _Rule:
    """One rule: DEFAULT when `pattern` is None. `template` is the replacement as literal text and group numbers."""

    pattern: re.Pattern[str] | None
    replacement: str
    template: tuple[str | int, ...]
    to_lower_case: bool
    to_upper_case: bool

    def apply(self, distinguished_name: str) -> str | None:
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        # Java's String.replaceAll: every match is replaced, not only the whole name.
        result = self.pattern.sub(self._expand, distinguished_name)
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else match.group(part) or "" for part in self.template)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = "/L" if self.to_lower_case else "/U" if self.to_upper_case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


@dataclass(frozen=True)
class SslPrincipalMapper:
    """The rules of one listener; `get_name` maps a distinguished name (as Java's X500Principal.getName() prints it)
    to the principal's name."""

    rules: tuple[_Rule, ...]

    @classmethod
    def from_rules(cls, rules: str) -> SslPrincipalMapper:
        """Parses `ssl.principal.mapping.rules` as Kafka does; ConfigError naming the property for a rule Kafka would
        refuse."""
        return cls(tuple(_parse_rule(rule, rules) for rule in _split_rules(rules) if rule))

    def get_name(self, distinguished_name: str) -> str:
        """The name the first matching rule gives; NoMatchingRule, as Kafka, when no rule matches."""
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def _split_rules(rules: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(rules.strip(_JAVA_WHITESPACE))]


def _parse_rule(rule: str, rules: str) -> _Rule:
    """One rule of the split list; empty ones are left out by the caller, as Kafka ignores them."""
    match = _RULE_PARSER.match(rule)
    assert match is not None  # the last alternative matches the empty string
    if match.end() != len(rule):
        raise _invalid(rules, f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end():]}`")
    if match.group(1) is not None:
        return _Rule(None, "", (), False, False)
    try:
        pattern = re.compile(match.group(2), re.ASCII)
    except re.error as e:
        raise _invalid(rules, f"Invalid pattern `{match.group(2)}` of rule `{rule}`: {e}") from None
    replacement = match.group(4)
    template = _replacement_template(replacement, pattern, rules)
    return _Rule(pattern, replacement, template, match.group(6) == "L", match.group(6) == "U")


def _replacement_template(replacement: str, pattern: re.Pattern[str], rules: str) -> tuple[str | int, ...]:
    """A Java replacement string (Matcher.appendReplacement) as literal text and group numbers."""
    parts: list[str | int] = []
    literal = ""
    i = 0
    while i < len(replacement):
        c = replacement[i]
        i += 1
        if c == "\\":  # never the last character: Kafka's rule pattern pairs a backslash with the next one
            literal += replacement[i]
            i += 1
        elif c != "$":
            literal += c
        elif replacement.startswith("{", i):
            end = replacement.find("}", i)
            name = replacement[i + 1:end]
            if end < 0 or name not in pattern.groupindex:
                raise _invalid(rules, f"Replacement `{replacement}` names no group of the pattern")
            parts += [literal, pattern.groupindex[name]]
            literal = ""
            i = end + 1
        elif i < len(replacement) and replacement[i] in string.digits:
            # The first digit always belongs to the reference; the next ones while they name a group.
            group = int(replacement[i])
            i += 1
            while i < len(replacement) and replacement[i] in string.digits:
                if group * 10 + int(replacement[i]) > pattern.groups:
                    break
                group = group * 10 + int(replacement[i])
                i += 1
            if group <= pattern.groups:
                parts += [literal, group]
                literal = ""
            elif pattern.groups == 0:
                raise _invalid(rules, f"Replacement `{replacement}` refers to group {group}: the pattern has none")
            else:
                literal += f"${group}"
        else:
            raise _invalid(rules, f"Replacement `{replacement}` has a `$` that starts no group reference")
    return (*parts, literal)


def _invalid(rules: str, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {rules!r} for configuration {RULES_CONFIG}: {reason}")
