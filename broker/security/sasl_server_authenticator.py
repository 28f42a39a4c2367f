"""One connection's SASL authentication on a SASL listener (Kafka's SaslServerAuthenticator), and re-authentication.

Until the client has authenticated, only ApiVersions (answered by the broker's APIs, once), SaslHandshake and
SaslAuthenticate are taken; any other request closes the connection with no response. SaslHandshake v1 makes the
tokens travel in SaslAuthenticate requests (KIP-152); after v0 they come as bare size-prefixed tokens, answered
the same way. A failed authentication is answered (SASL_AUTHENTICATION_FAILED with Kafka's message, or
UNSUPPORTED_SASL_MECHANISM) and the connection closed `connection.failed.authentication.delay.ms` later.

With `connections.max.reauth.ms` (KIP-368) a session lasts that long: SaslAuthenticate v1+ tells the client, which
re-authenticates on the same connection with a new SaslHandshake, as the same principal and with the same
mechanism; a request after the session has expired closes the connection.
"""
from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any

from minikafka.broker.security.listener_security import ListenerSecurity
from minikafka.broker.security.plain_sasl_server import INVALID_CREDENTIALS, PLAIN_MECHANISM
from minikafka.broker.security.sasl_server import SaslAuthenticationError, SaslError, SaslServer, create_sasl_server
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, ApiSchema, decode_request, encode_response
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.framing import frame
from minikafka.protocol.request_header import InvalidRequestError, RequestHeader

log = logging.getLogger("minikafka.security")

ANONYMOUS = "User:ANONYMOUS"


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake or versions"
    HANDSHAKE_REQUEST = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class AuthenticationClose(Exception):
    """The connection is closed without a response (Kafka's IllegalSaslStateException and the like)."""


@dataclass(frozen=True)
class AuthenticationStep:
    """What the connection sends back for a frame the authenticator took, and whether it then closes (after the
    failed-authentication delay)."""

    response: bytes | None
    close_after_s: float | None = None


class SaslServerAuthenticator:
    def __init__(self, security: ListenerSecurity, peer: str) -> None:
        self._security = security
        self._peer = peer
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.principal = ANONYMOUS
        self._mechanism: str | None = None
        self._server: SaslServer | None = None
        self._kafka_headers = True  # SaslHandshake v1+: tokens in SaslAuthenticate requests
        self._reauthenticating = False
        self._client_supports_reauthentication = False
        self.session_expires_at: float | None = None  # time.monotonic() seconds

    @property
    def max_receive_bytes(self) -> int:
        return self._security.max_receive_bytes

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE and not self._reauthenticating

    def expire_session(self) -> None:
        """End the session now (a fault): the next request closes the connection unless it re-authenticates."""
        self.session_expires_at = time.monotonic()

    def session_expired(self, now: float | None = None) -> bool:
        return self.session_expires_at is not None and (now or time.monotonic()) >= self.session_expires_at

    def take(self, request: bytes) -> AuthenticationStep | None:
        """The step for one request frame, or None to hand the request to the broker's APIs (ApiVersions before
        the handshake, and every request of an authenticated session). AuthenticationClose closes at once."""
        if self.state is SaslState.COMPLETE:
            return self._take_authenticated(request)
        if self.state is SaslState.AUTHENTICATE:
            return self._take_token(request)
        if self.state is SaslState.FAILED:
            raise AuthenticationClose("authentication failed")
        return self._take_handshake(request)

    def _take_authenticated(self, request: bytes) -> AuthenticationStep | None:
        header = _header(request)
        if header.api_key == ApiKey.SASL_HANDSHAKE and self.session_expires_at is not None:
            self._reauthenticating = True
            return self._take_handshake(request)
        if self.session_expired():
            raise AuthenticationClose(f"the SASL session of {self.principal} expired")
        return None

    def _take_handshake(self, request: bytes) -> AuthenticationStep | None:
        header, body_pos = _parse_header(request)
        if header.api_key == ApiKey.API_VERSIONS and not self._reauthenticating:
            if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
                raise AuthenticationClose("a second ApiVersions request during SASL authentication")
            schema = SCHEMAS[ApiKey.API_VERSIONS]
            if schema.min_version <= header.api_version <= schema.max_version:
                self.state = SaslState.HANDSHAKE_REQUEST
            return None
        if header.api_key != ApiKey.SASL_HANDSHAKE:
            raise AuthenticationClose(f"Unexpected Kafka request of type {_api_name(header.api_key)} during SASL "
                                      "handshake.")
        schema = SCHEMAS[ApiKey.SASL_HANDSHAKE]
        handshake = _decode(schema, header, request, body_pos)
        mechanisms = list(self._security.mechanisms)
        if header.api_version >= 1:
            self._kafka_headers = True
        else:
            self._kafka_headers = False
        mechanism = handshake.mechanism
        response_cls = schema.response[header.api_version]
        if mechanism not in mechanisms:
            log.info("closing connection from %s: unsupported SASL mechanism %s", self._peer, mechanism)
            return self._fail(encode_response(schema, header.api_version, header.correlation_id, response_cls(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)))
        if self._reauthenticating and mechanism != self._mechanism:
            return self._fail(encode_response(schema, header.api_version, header.correlation_id, response_cls(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)))
        self._mechanism = mechanism
        self._server = create_sasl_server(mechanism, self._security.credentials)
        self.state = SaslState.AUTHENTICATE
        return AuthenticationStep(encode_response(schema, header.api_version, header.correlation_id,
                                                  response_cls(error_code=0, mechanisms=mechanisms)))

    def _take_token(self, request: bytes) -> AuthenticationStep:
        assert self._server is not None and self._mechanism is not None
        if not self._kafka_headers:
            try:
                token = self._evaluate(request)
            except (SaslAuthenticationError, SaslError) as exc:
                log.info("failed authentication from %s with %s: %s", self._peer, self._mechanism, exc)
                return self._fail(None)
            self._complete_if_done()
            return AuthenticationStep(frame(token))
        header, body_pos = _parse_header(request)
        if header.api_key != ApiKey.SASL_AUTHENTICATE:
            raise AuthenticationClose(f"Unexpected Kafka request of type {_api_name(header.api_key)} during SASL "
                                      "authentication.")
        schema = SCHEMAS[ApiKey.SASL_AUTHENTICATE]
        authenticate = _decode(schema, header, request, body_pos)
        if header.api_version > 0:
            self._client_supports_reauthentication = True
        response_cls = schema.response[header.api_version]
        try:
            token = self._evaluate(bytes(authenticate.auth_bytes))
        except SaslAuthenticationError as exc:
            message = str(exc)
        except SaslError:
            message = (f"Authentication failed during {self._activity} due to invalid credentials with SASL "
                       f"mechanism {self._mechanism}")
        else:
            lifetime_ms = self._complete_if_done()
            return AuthenticationStep(encode_response(schema, header.api_version, header.correlation_id, response_cls(
                error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime_ms)))
        log.info("failed %s from %s with %s: %s", self._activity, self._peer, self._mechanism, message)
        return self._fail(encode_response(schema, header.api_version, header.correlation_id, response_cls(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b"",
            session_lifetime_ms=0)))

    def _evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer to the client's token; a user refused by a fault fails as a wrong password."""
        server = self._server
        assert server is not None
        answer = server.evaluate_response(token)
        if server.complete and self._security.refuses(server.authorization_id):
            if server.mechanism == PLAIN_MECHANISM:
                raise SaslAuthenticationError(INVALID_CREDENTIALS)
            raise SaslError(f"authentication of {server.authorization_id} refused by a fault")
        return answer

    @property
    def _activity(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    def _complete_if_done(self) -> int:
        """Once the mechanism completes: the principal, the session's end; the session lifetime in ms (0: none)."""
        server = self._server
        assert server is not None
        if not server.complete:
            return 0
        principal = f"User:{server.authorization_id}"
        if self._reauthenticating and principal != self.principal:
            raise AuthenticationClose(f"Cannot change principals during re-authentication from {self.principal} "
                                      f"to {principal}")
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._reauthenticating = False
        # The session ends at connections.max.reauth.ms or when the credential expires (an OAUTHBEARER token),
        # whichever comes first (Kafka's calcCompletionTimesAndReturnSessionLifetimeMs).
        now_ms = time.time() * 1000
        candidates = [self._security.reauth_ms] if self._security.reauth_ms > 0 else []
        if server.credential_expiry_ms is not None:
            candidates.append(max(0, int(server.credential_expiry_ms - now_ms)))
        if not candidates:
            self.session_expires_at = None
            return 0
        lifetime_ms = min(candidates)
        self.session_expires_at = time.monotonic() + lifetime_ms / 1000
        return lifetime_ms if self._client_supports_reauthentication else 0

    def _fail(self, response: bytes | None) -> AuthenticationStep:
        self.state = SaslState.FAILED
        return AuthenticationStep(response, self._security.failed_authentication_delay_ms / 1000)


def _header(request: bytes) -> RequestHeader:
    return _parse_header(request)[0]


def _parse_header(request: bytes) -> tuple[RequestHeader, int]:
    try:
        return RequestHeader.parse(request)
    except InvalidRequestError as exc:
        raise AuthenticationClose(str(exc)) from None


def _decode(schema: ApiSchema, header: RequestHeader, request: bytes, body_pos: int) -> Any:
    if not schema.min_version <= header.api_version <= schema.max_version:
        raise AuthenticationClose(f"Version {header.api_version} is not supported for API key {header.api_key}")
    try:
        return decode_request(schema, header, request, body_pos)
    except InvalidRequestError as exc:
        raise AuthenticationClose(str(exc)) from None


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
