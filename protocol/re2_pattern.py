"""Regular expressions from clients as Kafka's brokers take them: RE2/J syntax (KIP-848's subscription regexes,
ListTransactions' transactional id pattern).

A pattern is compiled with Python's `re`, which matches what RE2 accepts the same way, and refused if it uses what
RE2 does not have (lookaround, backreferences, conditionals, atomic groups, possessive quantifiers), as Kafka
refuses it with INVALID_REGULAR_EXPRESSION. The check walks `re`'s own parse tree, which has no public interface.
"""
from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]  # re's own parser, which has no stubs
import re._parser as sre_parser  # type: ignore[import-not-found]

# What Python's `re` has and RE2 does not: lookahead and lookbehind, backreferences, conditionals, atomic
# groups, possessive quantifiers.
_NOT_IN_RE2 = frozenset((sre_constants.ASSERT, sre_constants.ASSERT_NOT, sre_constants.GROUPREF,
                         sre_constants.GROUPREF_EXISTS, sre_constants.ATOMIC_GROUP, sre_constants.POSSESSIVE_REPEAT))


def re2_pattern(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled, if RE2 would compile it too; re.error otherwise."""
    compiled = re.compile(pattern)

    def outside_re2(node: object) -> bool:
        if isinstance(node, sre_parser.SubPattern):
            return any(op in _NOT_IN_RE2 or outside_re2(av) for op, av in node)
        return isinstance(node, (list, tuple)) and any(outside_re2(item) for item in node)

    if outside_re2(sre_parser.parse(pattern)):
        raise re.error(f"{pattern!r} uses a construct RE2 does not have")
    return compiled
