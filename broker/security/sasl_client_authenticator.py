"""One SASL authentication of an outgoing connection (Kafka's SaslClientAuthenticator), sans-IO: it says which
request to send and takes each response; the connection's owner does the sending.

The exchange is Kafka's since KIP-152: SaslHandshake v1 names the mechanism, then SaslAuthenticate requests carry
the mechanism's tokens until it completes. SaslAuthenticate v2 (v1 and later) tells the client how long its session
lasts when the server bounds it (`connections.max.reauth.ms`, an expiring token): the client re-authenticates
before then, on the same connection, with a new authenticator (KIP-368). A refusal (a mechanism the listener does
not enable, credentials it does not accept) is an AuthenticationError with the server's message, as Kafka's client
reports it.
"""
from __future__ import annotations

import enum
from typing import Any

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.sasl_client import SaslClient
from minikafka.broker.security.scram import SaslError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode

SASL_HANDSHAKE_VERSION = 1  # tokens in SaslAuthenticate requests (KIP-152)
SASL_AUTHENTICATE_VERSION = 2  # with the session lifetime (KIP-368)


class AuthenticationError(Exception):
    """Kafka's AuthenticationException on a client: the server refused the login or the mechanism, or the
    exchange broke off. Trying again at once with the same login would fail the same way."""


class _State(enum.Enum):
    SEND_HANDSHAKE_REQUEST = enum.auto()
    RECEIVE_HANDSHAKE_RESPONSE = enum.auto()
    RECEIVE_AUTHENTICATE_RESPONSE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class SaslClientAuthenticator:
    """Drives one SaslClient through the exchange: `handshake_request()`, then `receive(response)` for each response
    until it returns None (authenticated)."""

    def __init__(self, client: SaslClient) -> None:
        self._client = client
        self.mechanism = client.mechanism
        self._state = _State.SEND_HANDSHAKE_REQUEST
        self.session_lifetime_ms = 0  # as the server said: 0 when it does not bound the session

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def handshake_request(self) -> ApiMessage:
        if self._state is not _State.SEND_HANDSHAKE_REQUEST:
            raise RuntimeError(f"SaslHandshake is sent first, once (state {self._state.name})")
        self._state = _State.RECEIVE_HANDSHAKE_RESPONSE
        return SCHEMAS[ApiKey.SASL_HANDSHAKE].request[SASL_HANDSHAKE_VERSION](mechanism=self.mechanism)

    def receive(self, response: Any) -> ApiMessage | None:
        """The next request for the server's response to the last one, None once authenticated;
        AuthenticationError when the server refused or the mechanism cannot go on."""
        try:
            if self._state is _State.RECEIVE_HANDSHAKE_RESPONSE:
                self._check_handshake(response)
                return self._next(b"")  # the mechanism's initial response
            if self._state is _State.RECEIVE_AUTHENTICATE_RESPONSE:
                return self._receive_token(response)
            raise AuthenticationError(f"Unexpected SASL response in state {self._state.name}")
        except AuthenticationError:
            self._state = _State.FAILED
            raise

    def _check_handshake(self, response: Any) -> None:
        """Kafka's SaslClientAuthenticator.handleSaslHandshakeResponse, with its messages."""
        if response.error_code == ErrorCode.NONE:
            return
        enabled = f"[{', '.join(response.mechanisms)}]"
        if response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationError(f"Client SASL mechanism '{self.mechanism}' not enabled in the server, enabled "
                                      f"mechanisms are {enabled}")
        if response.error_code == ErrorCode.ILLEGAL_SASL_STATE:
            raise AuthenticationError(f"Unexpected handshake request with client mechanism {self.mechanism}, "
                                      f"enabled mechanisms are {enabled}")
        raise AuthenticationError(f"Unknown error code {response.error_code}, client mechanism is {self.mechanism}, "
                                  f"enabled mechanisms are {enabled}")

    def _receive_token(self, response: Any) -> ApiMessage | None:
        if response.error_code != ErrorCode.NONE:
            raise AuthenticationError(response.error_message or _error_name(response.error_code))
        self.session_lifetime_ms = response.session_lifetime_ms
        if self._client.complete:
            self._state = _State.COMPLETE
            return None
        return self._next(bytes(response.auth_bytes))

    def _next(self, challenge: bytes) -> ApiMessage | None:
        """The SaslAuthenticate request carrying the mechanism's answer to `challenge`; None once it has nothing
        more to say and is complete."""
        try:
            token = self._client.evaluate_challenge(challenge)
        except SaslError as exc:
            raise AuthenticationError(f"An error: ({exc}) occurred when evaluating SASL token received from the "
                                      "Kafka Broker.") from None
        if token is None:
            if not self._client.complete:
                raise AuthenticationError(f"SASL/{self.mechanism} has no response to send and has not completed")
            self._state = _State.COMPLETE
            return None
        self._state = _State.RECEIVE_AUTHENTICATE_RESPONSE
        return SCHEMAS[ApiKey.SASL_AUTHENTICATE].request[SASL_AUTHENTICATE_VERSION](auth_bytes=token)


def _error_name(error_code: int) -> str:
    try:
        return ErrorCode(error_code).name
    except ValueError:
        return f"error {error_code}"
