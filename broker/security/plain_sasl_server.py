"""The server side of SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: one response, `authzid NUL authcid NUL
passwd` in UTF-8, checked against the passwords of the listener's PLAIN JAAS options."""
from __future__ import annotations

import hmac
from collections.abc import Callable

from minikafka.broker.security.scram import MAX_RESPONSE_BYTES, SaslAuthenticationError, SaslError

PLAIN_MECHANISM = "PLAIN"

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainSaslServer:
    """One PLAIN authentication. `password_of` gives a user's password, None for a user that has none."""

    mechanism = PLAIN_MECHANISM
    credential_expiry_ms: int | None = None  # a password does not expire

    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self._complete = False
        self._authorization_id = ""

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, token: bytes) -> bytes:
        """b"" once the user is authenticated; SaslAuthenticationError, with Kafka's message, otherwise."""
        if len(token) > MAX_RESPONSE_BYTES:
            raise SaslError(f"PLAIN response of {len(token)} bytes: the most read is {MAX_RESPONSE_BYTES}")
        # As Java decodes: bytes that are not UTF-8 become U+FFFD.
        tokens = token.decode(errors="replace").split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._password_of(username)
        # surrogatepass: a configured password may hold what no UTF-8 response can (a lone surrogate, from a
        # properties file's \uXXXX escape); it then matches no response instead of failing the comparison.
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode(errors="surrogatepass")):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        self._complete = True
        return b""
