"""The client side of the SASL mechanisms, for the broker's own connections (to other brokers, to the controller):
one SaslClient per authentication, made from the node's own login.

The login is the JAAS configuration of the listener connected to, as Kafka's broker reads its own (the
`KafkaServer` context, which serves its outgoing connections too): `username` and `password` for PLAIN and SCRAM
(PLAIN's JAAS options also hold the listener's users, `user_<name>`, which only the server side reads), and for
OAUTHBEARER an unsecured token made from the `unsecuredLogin*` options, as Kafka's
OAuthBearerUnsecuredLoginCallbackHandler makes it (`unsecuredLoginStringClaim_sub="admin"`).

A mechanism raises SaslError when the server's answer is not what the mechanism expects (a nonce not its own, a
server signature that does not prove the credential): the authenticator fails the authentication with it.
"""
from __future__ import annotations

import base64
import enum
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from minikafka.broker.security.jaas import parse_jaas_config
from minikafka.broker.security.scram import (
    SaslError,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    client_proof,
    salted_password,
    sasl_name,
    secure_random_string,
    server_key,
    server_signature,
)
from minikafka.config import ConfigError

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
# The mechanisms a broker's own connections authenticate with; GSSAPI (Kerberos), Kafka's default, is not one.
CLIENT_MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)

GS2_HEADER = "n,,"  # no channel binding, no authorization id
_SEPARATOR = "\x01"  # OAUTHBEARER's key/value separator, and a client's acknowledgement of a server's error

# Kafka's OAuthBearerUnsecuredLoginCallbackHandler options.
_STRING_CLAIM = "unsecuredLoginStringClaim_"
_NUMBER_CLAIM = "unsecuredLoginNumberClaim_"
_LIST_CLAIM = "unsecuredLoginListClaim_"
_EXTENSION = "unsecuredLoginExtension_"
_RESERVED_CLAIMS = frozenset({"iat", "exp"})
_DEFAULT_LIFETIME_S = "3600"


class SaslClient(Protocol):
    """One authentication's client side (javax's SaslClient as Kafka uses it); every mechanism here has an initial
    response, the answer to an empty challenge."""

    mechanism: str

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The response to the server's challenge, None when there is nothing more to send."""
        ...

    @property
    def complete(self) -> bool: ...


class PlainSaslClient:
    """SASL/PLAIN (RFC 4616): one message, `NUL username NUL password`."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._complete:
            raise SaslError("Unexpected challenge: SASL/PLAIN has completed")
        self._complete = True
        return f"\0{self._username}\0{self._password}".encode()


class _ScramState(enum.Enum):
    SEND_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramSaslClient:
    """SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's ScramSaslClient): the client's first message names the user
    and a nonce; to the server's salt and iterations it answers with a proof of the password; the server's final
    message must prove that the server holds the credential too."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._username = username
        self._password = password
        self._state = _ScramState.SEND_CLIENT_FIRST_MESSAGE
        self._nonce = ""
        self._client_first_bare = ""
        self._salted_password = b""
        self._auth_message = b""

    @property
    def complete(self) -> bool:
        return self._state is _ScramState.COMPLETE

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        try:
            if self._state is _ScramState.SEND_CLIENT_FIRST_MESSAGE:
                return self._client_first(challenge)
            if self._state is _ScramState.RECEIVE_SERVER_FIRST_MESSAGE:
                return self._client_final(ServerFirstMessage.parse(challenge), challenge.decode())
            if self._state is _ScramState.RECEIVE_SERVER_FINAL_MESSAGE:
                self._check_server_final(ServerFinalMessage.parse(challenge))
                return None
            raise SaslError(f"Unexpected challenge in Sasl client state {self._state.name}")
        except SaslError:
            self._state = _ScramState.FAILED
            raise

    def _client_first(self, challenge: bytes) -> bytes:
        if challenge:
            raise SaslError("Expected empty challenge")
        self._nonce = secure_random_string()
        self._client_first_bare = f"n={sasl_name(self._username)},r={self._nonce}"
        self._state = _ScramState.RECEIVE_SERVER_FIRST_MESSAGE
        return (GS2_HEADER + self._client_first_bare).encode()

    def _client_final(self, server_first: ServerFirstMessage, server_first_text: str) -> bytes:
        if not server_first.nonce.startswith(self._nonce):
            raise SaslError("Invalid server nonce: does not start with client nonce")
        if server_first.iterations < self._scram.min_iterations:
            raise SaslError(f"Requested iterations {server_first.iterations} is less than the minimum "
                            f"{self._scram.min_iterations} for {self.mechanism}")
        self._salted_password = salted_password(self._scram, self._password, server_first.salt,
                                                server_first.iterations)
        without_proof = f"c={base64.b64encode(GS2_HEADER.encode()).decode()},r={server_first.nonce}"
        self._auth_message = auth_message(self._client_first_bare, server_first_text, without_proof)
        proof = client_proof(self._scram, self._salted_password, self._auth_message)
        self._state = _ScramState.RECEIVE_SERVER_FINAL_MESSAGE
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: ServerFinalMessage) -> None:
        if server_final.error is not None:
            raise SaslError(f"Sasl authentication using {self.mechanism} failed with error: {server_final.error}")
        expected = server_signature(self._scram, server_key(self._scram, self._salted_password), self._auth_message)
        if not hmac.compare_digest(expected, server_final.server_signature):
            raise SaslError("Invalid server signature in server final message")
        self._salted_password = b""
        self._state = _ScramState.COMPLETE


class OAuthBearerSaslClient:
    """SASL/OAUTHBEARER (RFC 7628, Kafka's OAuthBearerSaslClient): one message with the bearer token. A server that
    refuses the token answers with a JSON error, which the client acknowledges with a lone 0x01; the server then
    fails the authentication with that JSON as its message."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str]) -> None:
        self._token = token
        self._extensions = extensions
        self._sent = False
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            if challenge:
                raise SaslError("Expected empty challenge")
            self._sent = True
            extensions = "".join(f"{_SEPARATOR}{key}={value}" for key, value in self._extensions.items())
            return f"{GS2_HEADER}{_SEPARATOR}auth=Bearer {self._token}{extensions}{_SEPARATOR}{_SEPARATOR}".encode()
        if self._complete:
            raise SaslError("Unexpected challenge: SASL/OAUTHBEARER has completed")
        if challenge:  # the server's error: acknowledged, and the server ends the authentication with it
            return _SEPARATOR.encode()
        self._complete = True
        return None


@dataclass(frozen=True)
class SaslClientLogin:
    """The node's own login for one mechanism (Kafka's LoginManager for the broker's client side): each
    authentication gets a SaslClient made from it."""

    mechanism: str
    options: Mapping[str, str] = field(repr=False)  # the JAAS login module's options: they hold the password
    property_name: str  # the `sasl.jaas.config` property they come from, for errors

    @classmethod
    def from_jaas_config(cls, mechanism: str, jaas_config: str, property_name: str) -> SaslClientLogin:
        """The login of a `sasl.jaas.config` value for `mechanism` (one of CLIENT_MECHANISMS); ConfigError naming
        `property_name` for one a client cannot authenticate with (no username or password, an unsecured token
        without its principal)."""
        options = parse_jaas_config(jaas_config, property_name)[0].options
        if mechanism == OAUTHBEARER:
            unsecured_token(options, property_name)  # refused now rather than at the first connection
        else:
            missing = [name for name in ("username", "password") if name not in options]
            if missing:
                raise ConfigError(f"Invalid value for configuration {property_name}: the broker's own {mechanism} "
                                  f"login needs the options username and password ({' and '.join(missing)} "
                                  "missing)")
        return cls(mechanism, options, property_name)

    def create_client(self) -> SaslClient:
        """A client for one authentication (an OAUTHBEARER token made afresh, valid from now)."""
        if self.mechanism == PLAIN:
            return PlainSaslClient(self.options["username"], self.options["password"])
        if self.mechanism == OAUTHBEARER:
            return OAuthBearerSaslClient(unsecured_token(self.options, self.property_name), {
                key.removeprefix(_EXTENSION): value for key, value in self.options.items()
                if key.startswith(_EXTENSION)})
        scram = ScramMechanism.for_mechanism_name(self.mechanism)
        assert scram is not None, self.mechanism  # from_jaas_config took only CLIENT_MECHANISMS
        return ScramSaslClient(scram, self.options["username"], self.options["password"])


def unsecured_token(options: Mapping[str, str], property_name: str, now_s: float | None = None) -> str:
    """An unsecured JWS (`alg: none`) with the claims the JAAS options give, as Kafka's
    OAuthBearerUnsecuredLoginCallbackHandler makes it: `iat` now, `exp` unsecuredLoginLifetimeSeconds (3600) later,
    the string, number and list claims (a list's first character is its delimiter), the principal in the claim
    unsecuredLoginPrincipalClaimName names (`sub`). ConfigError naming `property_name` for options Kafka refuses."""
    now_s = int(time.time() * 1000) / 1000 if now_s is None else now_s  # in ms, as Java's clock: never ahead
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "").strip() or "sub"
    try:
        claims: dict[str, object] = {
            "exp": now_s + int(options.get("unsecuredLoginLifetimeSeconds", _DEFAULT_LIFETIME_S)), "iat": now_s}
        for key, value in options.items():
            claim = _claim(key, value)
            if claim is not None:
                if claim[0] in _RESERVED_CLAIMS:
                    raise ValueError(f"Cannot explicitly set the '{claim[0]}' claim")
                claims[claim[0]] = claim[1]
    except ValueError as exc:
        raise ConfigError(f"Invalid value for configuration {property_name}: {exc}") from None
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise ConfigError(f"Invalid value for configuration {property_name}: No principal name in JWT claim: "
                          f"{principal_claim} (set {_STRING_CLAIM}{principal_claim})")
    return f"{_base64url({'alg': 'none'})}.{_base64url(claims)}."


def _claim(option: str, value: str) -> tuple[str, object] | None:
    """The claim a login option sets, if it sets one; ValueError for a number that is not one."""
    for prefix in (_STRING_CLAIM, _NUMBER_CLAIM, _LIST_CLAIM):
        name = option.removeprefix(prefix)
        if option.startswith(prefix) and name:
            if prefix == _STRING_CLAIM:
                return name, value
            if prefix == _NUMBER_CLAIM:
                return name, float(value)
            return name, value[1:].split(value[0]) if len(value) > 1 else []
    return None


def _base64url(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).rstrip(b"=").decode()
