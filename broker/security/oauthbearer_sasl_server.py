"""The server side of SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer, and the two token validators
Kafka's broker offers.

The client's one message carries a bearer token (Kafka's OAuthBearerClientInitialResponse). A token that does not
validate is not refused at once: the server answers with an RFC 7628 error (`{"status":"invalid_token"}`), the
client acknowledges it with a lone 0x01, and only then does the authentication fail, with that same JSON as the
message the client is told. Why the token failed only the log sees, as in Kafka.

- UnsecuredValidator is Kafka's default (OAuthBearerUnsecuredValidatorCallbackHandler): an unsigned JWS
  (`alg: none`), checked against the listener's OAUTHBEARER JAAS options. For development only.
- JwksValidator is Kafka's OAuthBearerValidatorCallbackHandler: a signed JWT, verified with the keys of a JWKS
  (`sasl.oauthbearer.jwks.endpoint.url`), here a file or an http server on this host. An http JWKS is fetched
  at start, then again in the background (every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, or at once for a
  token naming a key not known, which fails meanwhile, as in Kafka): the event loop never waits on it.

Both of Kafka's handlers accept every SASL extension the client sends; none is used here.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jwt

from minikafka.broker.security.scram import SaslAuthenticationError, SaslError
from minikafka.config import ConfigError

log = logging.getLogger("minikafka.security")

OAUTHBEARER_MECHANISM = "OAUTHBEARER"

# The largest client message read: a JWT carrying many claims (groups, roles) runs to several KiB.
MAX_OAUTHBEARER_RESPONSE_BYTES = 65536

# Java's String.trim(): every character up to U+0020.
_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))


@dataclass(frozen=True)
class ValidatedToken:
    """A token that validated (Kafka's OAuthBearerToken)."""

    principal_name: str
    lifetime_ms: int  # when the token expires, ms since the epoch (Kafka's lifetimeMs)
    scope: frozenset[str]


class OAuthBearerValidationError(Exception):
    """A token that does not validate (Kafka's OAuthBearerIllegalTokenException and ValidateException). The message
    is for the log; the client is told only the RFC 7628 status and, for a missing scope, the scope required."""

    def __init__(self, message: str, error_status: str = "invalid_token", error_scope: str | None = None) -> None:
        super().__init__(message)
        self.error_status = error_status
        self.error_scope = error_scope


class OAuthBearerValidator(Protocol):
    def validate(self, token: str) -> ValidatedToken:
        """The validated token; OAuthBearerValidationError if it does not validate."""
        ...


# The client's message (OAuthBearerClientInitialResponse's patterns).
_SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # [\x01-\x7F] but `,` and `=`
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_AUTH_KEY = "auth"


class OAuthBearerSaslServer:
    """One OAUTHBEARER authentication, its token checked by `validator`."""

    mechanism = OAUTHBEARER_MECHANISM

    def __init__(self, validator: OAuthBearerValidator) -> None:
        self._validator = validator
        self._token: ValidatedToken | None = None
        self._error_message: str | None = None  # the JSON error the client was sent, until it acknowledges it
        # When the token expires (ms since the epoch), once complete: the session ends then at the latest (KIP-368).
        self.credential_expiry_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._token.principal_name

    def evaluate_response(self, token: bytes) -> bytes:
        """b"" once the client is authenticated; the JSON error for a token that does not validate, after which the
        client's 0x01 fails the authentication with that JSON (SaslAuthenticationError); SaslError for a message
        that is not OAUTHBEARER's."""
        if token == _SEPARATOR.encode() and self._error_message is not None:
            raise SaslAuthenticationError(self._error_message)
        self._error_message = None
        if len(token) > MAX_OAUTHBEARER_RESPONSE_BYTES:
            raise SaslError(f"OAUTHBEARER response of {len(token)} bytes: the most read is "
                            f"{MAX_OAUTHBEARER_RESPONSE_BYTES}")
        token_value, authorization_id = _parse_client_initial_response(token)
        try:
            validated = self._validator.validate(token_value)
        except OAuthBearerValidationError as exc:
            self._error_message = _json_error_response(exc.error_status, exc.error_scope)
            log.debug("OAUTHBEARER token refused: %s", exc)
            return self._error_message.encode()
        if authorization_id and authorization_id != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authorization_id}) that is different "
                f"from the token's principal name ({validated.principal_name})")
        self._token = validated
        self.credential_expiry_ms = validated.lifetime_ms
        return b""


def _parse_client_initial_response(response: bytes) -> tuple[str, str]:
    """The token and the authorization id ("" if none) of the client's message. Its extensions are read only to be
    checked, as Kafka's handlers take them all as valid."""
    # As Java decodes: bytes that are not UTF-8 become U+FFFD, which no part of the message may hold.
    match = _CLIENT_INITIAL_RESPONSE.fullmatch(response.decode(errors="replace"))
    if match is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    # Kafka's Utils.parseMap: the last of a repeated key wins.
    properties = dict(pair.split("=", 1) for pair in match["kvpairs"].split(_SEPARATOR) if pair)
    auth = properties.get(_AUTH_KEY)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}")
    return auth_match["token"], match["authzid"] or ""


def _json_error_response(status: str, scope: str | None) -> str:
    """RFC 7628's error, spelled as Kafka spells it."""
    scope_part = "" if scope is None else f', "scope":"{scope}"'
    return f'{{"status":"{status}"{scope_part}}}'


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: an unsecured JWS (RFC 7515, `alg: none`) whose
    principal claim is a string, that expires in the future and was not issued in the future (both within the
    allowed clock skew), and that holds every required scope."""

    def __init__(self, principal_claim_name: str = "sub", scope_claim_name: str = "scope",
                 required_scope: tuple[str, ...] = (), allowable_clock_skew_ms: int = 0,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = scope_claim_name
        self.required_scope = required_scope
        self.allowable_clock_skew_ms = allowable_clock_skew_ms
        self._now_ms = now_ms

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str], property_name: str) -> UnsecuredValidator:
        """The validator of the OAUTHBEARER login module's options (`unsecuredValidatorPrincipalClaimName`, ...; a
        blank option takes its default); ConfigError naming `property_name` (the `sasl.jaas.config` property) for
        an option Kafka refuses."""
        def option(name: str, default: str) -> str:
            value = options.get(name, "").strip(_JAVA_WHITESPACE)
            return value or default

        required_scope = tuple(item for item in option("unsecuredValidatorRequiredScope", "").split(" ") if item)
        for item in required_scope:
            if re.fullmatch(r"[\x21\x23-\x5B\x5D-\x7E]+", item) is None:
                raise ConfigError(f"Invalid value for configuration {property_name}: Invalid scope value: {item}")
        skew = option("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            allowable_clock_skew_ms = int(skew)
        except ValueError:
            raise ConfigError(f"Invalid value for configuration {property_name}: For input string: \"{skew}\"") \
                from None
        if allowable_clock_skew_ms < 0:
            raise ConfigError(f"Invalid value for configuration {property_name}: Allowable clock skew millis must "
                              f"not be negative: {skew}")
        return cls(option("unsecuredValidatorPrincipalClaimName", "sub"),
                   option("unsecuredValidatorScopeClaimName", "scope"), required_scope, allowable_clock_skew_ms)

    def validate(self, token: str) -> ValidatedToken:
        """Kafka's checks, in Kafka's order, with its messages."""
        jws = _UnsecuredJws(token, self.principal_claim_name, self.scope_claim_name)
        now, skew = self._now_ms(), self.allowable_clock_skew_ms
        # Kafka compares the claims as ms (Java's Math.round of seconds * 1000): a token made in the ms it is
        # checked in was not issued after it.
        issued_at_ms = None if jws.issued_at is None else _claim_ms(jws.issued_at)
        expiration_ms = _claim_ms(jws.expiration_time)
        if issued_at_ms is not None and issued_at_ms > now + skew:
            raise OAuthBearerValidationError(
                f"The Issued At value ({jws.issued_at:f} seconds) was after the indicated time ({now} ms) plus "
                f"allowable clock skew ({skew} ms)")
        if now - skew >= expiration_ms:
            raise OAuthBearerValidationError(
                f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or after the "
                f"Expiration Time value ({jws.expiration_time:f} seconds)")
        if issued_at_ms is not None and expiration_ms <= issued_at_ms:
            raise OAuthBearerValidationError(
                f"The Expiration Time time ({jws.expiration_time:f} seconds) was not after the Issued At time "
                f"({jws.issued_at:f} seconds)")
        for required in self.required_scope:
            if required not in jws.scope:
                required_text = _java_list(self.required_scope)
                raise OAuthBearerValidationError(
                    f"The provided scope ({_java_list(sorted(jws.scope))}) was missing a required scope "
                    f"({required}).  All required scope elements: {required_text}",
                    "insufficient_scope", required_text)
        return ValidatedToken(jws.principal_name, expiration_ms, jws.scope)


class _UnsecuredJws:
    """Kafka's OAuthBearerUnsecuredJws: the claims of an unsecured JWS as Kafka reads them (Jackson's view of the
    JSON: an array is a list of strings, a number a number, anything else its text)."""

    def __init__(self, token: str, principal_claim_name: str, scope_claim_name: str) -> None:
        if ".." in token:
            raise OAuthBearerValidationError("Malformed compact serialization contains '..'")
        splits = token.split(".")
        while splits and not splits[-1]:  # Java's split drops trailing empty strings...
            splits.pop()
        if token.endswith("."):  # ...and Kafka puts back the empty signature
            splits.append("")
        if len(splits) != 3:
            raise OAuthBearerValidationError(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _to_map(splits[0])
        self._claims = _to_map(splits[1])
        if "alg" not in header:
            raise OAuthBearerValidationError("JWS header must have an Algorithm value")
        if header["alg"] != "none":
            raise OAuthBearerValidationError("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise OAuthBearerValidationError("Unsecured JWS must not contain a digital signature")
        self.scope = self._scope(scope_claim_name)
        expiration_time = self._claim("exp", "Number")
        if expiration_time is None:
            raise OAuthBearerValidationError("No expiration time in JWT")
        self.expiration_time: float = expiration_time
        principal_name = self._claim(principal_claim_name, "String")
        if principal_name is None or not principal_name.strip(_JAVA_WHITESPACE):
            raise OAuthBearerValidationError(f"No principal name in JWT claim: {principal_claim_name}")
        self.principal_name: str = principal_name
        self.issued_at: float | None = self._claim("iat", "Number")

    def _claim(self, name: str, java_type: str) -> Any:
        """The claim's value, None if there is none; OAuthBearerValidationError if it is not of `java_type`."""
        value = self._claims.get(name)
        if value is not None and _java_type(value) not in _ASSIGNABLE[java_type]:
            raise OAuthBearerValidationError(
                f"The '{name}' claim was not of type {java_type}: {_java_type(value)}")
        return value

    def _scope(self, name: str) -> frozenset[str]:
        value = self._claims.get(name)
        if isinstance(value, str):
            value = value.strip(_JAVA_WHITESPACE)
            return frozenset([value] if value else [])  # a string is one scope, spaces and all
        items = self._claim(name, "List") or []
        return frozenset(item.strip(_JAVA_WHITESPACE) for item in items if item.strip(_JAVA_WHITESPACE))


_ASSIGNABLE = {"String": {"String"}, "Number": {"Integer", "Long", "BigInteger", "Double"}, "List": {"ArrayList"}}


def _claim_ms(seconds: float) -> int:
    """A time claim in seconds as Kafka reads it: Java's Math.round(seconds * 1000)."""
    return math.floor(seconds * 1000 + 0.5)


def _to_map(split: str) -> dict[str, Any]:
    """One part's JSON object. Kafka decodes with the base64 alphabet, not base64url's; either is taken here."""
    try:
        data = base64.b64decode(split.replace("-", "+").replace("_", "/") + "=" * (-len(split) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise OAuthBearerValidationError("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(data)
    except ValueError:
        raise OAuthBearerValidationError("malformed JSON") from None
    if not isinstance(value, dict):
        return {}  # Jackson's fields() of anything but an object: none
    return {key: [_as_text(item) for item in item_value] if isinstance(item_value, list)
            else item_value if _is_number(item_value) else _as_text(item_value)
            for key, item_value in value.items()}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_text(value: object) -> str:
    """Jackson's asText()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return ""
    return str(value)


def _java_type(value: object) -> str:
    """The simple name of the Java class Jackson gives the value."""
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    assert isinstance(value, int)
    return "Integer" if -2**31 <= value < 2**31 else "Long" if -2**63 <= value < 2**63 else "BigInteger"


def _java_list(items: tuple[str, ...] | list[str]) -> str:
    """A Java collection's toString()."""
    return f"[{', '.join(items)}]"


# Kafka's SaslConfigs names.
SASL_OAUTHBEARER_JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
SASL_OAUTHBEARER_EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
SASL_OAUTHBEARER_EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
SASL_OAUTHBEARER_SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
SASL_OAUTHBEARER_SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"

# Fetching the JWKS blocks the caller (at start, and for a token naming a key not yet known): only this long.
JWKS_FETCH_TIMEOUT_S = 2.0
_MAX_JWKS_BYTES = 1 << 20
# Kafka's RefreshingHttpsJwks: a key id not found is fetched for at most once a minute, and only a short one.
MISSING_KEY_ID_CACHE_IN_FLIGHT_MS = 60000
MISSING_KEY_ID_MAX_KEY_LENGTH = 1000
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: a JWT signed with a key of the JWKS (matched by the token's
    `kid`), with `exp` and `iat`, expired no longer ago than the clock skew, of the expected audience and issuer
    when they are configured, whose subject claim is a non-blank string."""

    def __init__(self, jwks_endpoint_url: str, *, expected_audience: tuple[str, ...] = (),
                 expected_issuer: str | None = None, sub_claim_name: str = "sub", scope_claim_name: str = "scope",
                 clock_skew_seconds: int = 30, refresh_ms: int = 3600000) -> None:
        """ConfigError, naming `sasl.oauthbearer.jwks.endpoint.url`, for a URL not served here or a JWKS that
        cannot be read."""
        self._url = jwks_endpoint_url
        self._expected_audience = expected_audience
        self._expected_issuer = expected_issuer
        self._sub_claim_name = sub_claim_name
        self._scope_claim_name = scope_claim_name
        self._clock_skew_seconds = clock_skew_seconds
        self._refresh_ms = refresh_ms
        self._file = _jwks_file(jwks_endpoint_url)
        self._missing_key_ids: dict[str, float] = {}  # key id: when it may be fetched for again (monotonic s)
        self._refresh_thread: threading.Thread | None = None
        try:
            self._keys = self._fetch()
        except OSError as exc:
            raise ConfigError(f"The OAuth validator configuration encountered an error when initializing the "
                              f"VerificationKeyResolver from {SASL_OAUTHBEARER_JWKS_ENDPOINT_URL} "
                              f"({jwks_endpoint_url}): {exc}") from None
        self._fetched_at = time.monotonic()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> JwksValidator:
        """The validator of a listener's properties: `sasl.oauthbearer.*`, each also taken from the mechanism's
        prefix (`oauthbearer.sasl.oauthbearer.*`, Kafka's ConfigurationUtils) first; Kafka's defaults."""
        def get(name: str) -> str | None:
            value = props.get(f"{OAUTHBEARER_MECHANISM.lower()}.{name}", props.get(name))
            value = None if value is None else value.strip()
            return value or None

        def integer(name: str, default: int) -> int:
            value = get(name)
            try:
                return default if value is None else int(value)
            except ValueError:
                raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                  f"{'INT' if name == SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS else 'LONG'}") from None

        url = get(SASL_OAUTHBEARER_JWKS_ENDPOINT_URL)
        if url is None:
            raise ConfigError(f"The OAuth configuration option {SASL_OAUTHBEARER_JWKS_ENDPOINT_URL} value must be "
                              "non-null")
        refresh_ms = integer(SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS, 3600000)
        if refresh_ms < 0:
            raise ConfigError(f"The OAuth configuration option {SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS} value "
                              "must be at least 0")
        audience = tuple(a.strip() for a in (get(SASL_OAUTHBEARER_EXPECTED_AUDIENCE) or "").split(",") if a.strip())
        return cls(url, expected_audience=audience, expected_issuer=get(SASL_OAUTHBEARER_EXPECTED_ISSUER),
                   sub_claim_name=get(SASL_OAUTHBEARER_SUB_CLAIM_NAME) or "sub",
                   scope_claim_name=get(SASL_OAUTHBEARER_SCOPE_CLAIM_NAME) or "scope",
                   clock_skew_seconds=integer(SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS, 30), refresh_ms=refresh_ms)

    def validate(self, token: str) -> ValidatedToken:
        """Kafka's ValidatorAccessTokenValidator, with pyjwt verifying the signature and the registered claims."""
        token = token.strip(_JAVA_WHITESPACE)
        _check_serialized_jwt(token)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise OAuthBearerValidationError(f"Could not validate the access token: {exc}") from None
        self._maybe_refresh()
        candidates = self._candidate_keys(header)
        if not candidates and self._may_fetch_for(header.get("kid")):
            self._refresh_in_background()  # as Kafka's maybeExpediteRefresh: this token fails, a later one may pass
        if not candidates:
            raise OAuthBearerValidationError(
                f"Could not validate the access token: Unable to find a suitable verification key for JWS w/ header "
                f"{json.dumps(header)} obtained from {self._url}")
        claims = self._verified_claims(token, header["alg"], candidates)
        return ValidatedToken(self._subject(claims), int(claims["exp"]) * 1000, self._scope(claims))

    def _verified_claims(self, token: str, algorithm: str, keys: list[jwt.PyJWK]) -> dict[str, Any]:
        """The claims of the token, verified with the first of `keys` its signature verifies with."""
        error: jwt.InvalidTokenError | None = None
        for key in keys:
            try:
                return jwt.decode(
                    token, key.key, algorithms=[algorithm], audience=self._expected_audience or None,
                    issuer=self._expected_issuer, leeway=self._clock_skew_seconds,
                    options={"require": ["exp", "iat"], "verify_sub": False, "verify_jti": False})
            except jwt.InvalidSignatureError as exc:
                error = exc  # another key with this id may verify it
            except jwt.InvalidTokenError as exc:
                raise OAuthBearerValidationError(f"Could not validate the access token: {exc}") from None
        raise OAuthBearerValidationError(f"Could not validate the access token: {error}")

    def _candidate_keys(self, header: dict[str, Any]) -> list[jwt.PyJWK]:
        """The keys that may have signed a token with this header: of its key id (any, without one), meant for
        signing with its algorithm (never `none`)."""
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm == "none":
            return []
        keys = []
        for jwk in self._keys:
            if (kid is not None and jwk.get("kid") != kid or jwk.get("use", "sig") != "sig"
                    or jwk.get("alg", algorithm) != algorithm):
                continue
            try:
                keys.append(jwt.PyJWK(jwk, algorithm))
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key of another type than the algorithm's
        return keys

    def _subject(self, claims: Mapping[str, Any]) -> str:
        name = self._sub_claim_name
        value = claims.get(name)
        if value is not None and not isinstance(value, str):
            raise OAuthBearerValidationError(f"Could not extract the '{name}' claim from the access token")
        return _claim_string(name, value)

    def _scope(self, claims: Mapping[str, Any]) -> frozenset[str]:
        name = self._scope_claim_name
        raw = claims.get(name)
        items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        scope: set[str] = set()
        for item in items:
            if item is not None and not isinstance(item, str):
                raise OAuthBearerValidationError(f"Could not extract the '{name}' claim from the access token")
            item = _claim_string(name, item)
            if item in scope:
                raise OAuthBearerValidationError(f"{name} value must not contain duplicates - {item} already present")
            scope.add(item)
        return frozenset(scope)

    def _maybe_refresh(self) -> None:
        """An http JWKS is fetched again every `sasl.oauthbearer.jwks.endpoint.refresh.ms`; a failed fetch keeps
        the keys known."""
        if self._file is None and (time.monotonic() - self._fetched_at) * 1000 >= self._refresh_ms:
            self._refresh_in_background()

    def _refresh_in_background(self) -> None:
        """Fetch the JWKS on a thread of its own (Kafka's RefreshingHttpsJwks executor), one fetch at a time: the
        broker's event loop never waits on the endpoint; validations use the keys known until it answers."""
        if self._refresh_thread is not None and self._refresh_thread.is_alive():
            return
        self._fetched_at = time.monotonic()
        self._refresh_thread = threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True)
        self._refresh_thread.start()

    def _may_fetch_for(self, kid: object) -> bool:
        """Whether a token naming a key not known may fetch the JWKS (an http one) again now."""
        if self._file is not None or not isinstance(kid, str) or len(kid) > MISSING_KEY_ID_MAX_KEY_LENGTH:
            return False
        now = time.monotonic()
        if self._missing_key_ids.get(kid, now) > now:
            return False
        self._missing_key_ids = {k: t for k, t in self._missing_key_ids.items() if t > now}
        self._missing_key_ids[kid] = now + MISSING_KEY_ID_CACHE_IN_FLIGHT_MS / 1000
        return True

    def _refresh(self) -> None:
        try:
            self._keys = self._fetch()
        except OSError as exc:
            log.warning("could not fetch the JWKS from %s: %s", self._url, exc)

    def _fetch(self) -> list[dict[str, Any]]:
        """The JWKS's keys; OSError if it cannot be read or holds no key pyjwt can use."""
        if self._file is not None:
            text = self._file.read_bytes()
        else:
            with _NO_PROXY_NO_REDIRECT.open(self._url, timeout=JWKS_FETCH_TIMEOUT_S) as response:
                text = response.read(_MAX_JWKS_BYTES + 1)
            if len(text) > _MAX_JWKS_BYTES:
                raise OSError(f"the JWKS is larger than {_MAX_JWKS_BYTES} bytes")
        try:
            jwks = json.loads(text)
            jwt.PyJWKSet.from_dict(jwks)  # at least one usable key
        except (ValueError, AttributeError, jwt.PyJWKSetError) as exc:
            raise OSError(f"not a JWKS: {exc}") from None
        return [key for key in jwks["keys"] if isinstance(key, dict)]


def _check_serialized_jwt(token: str) -> None:
    """Kafka's SerializedJwt: three non-blank sections."""
    if not token:
        raise OAuthBearerValidationError(
            "Empty JWT provided; expected three sections (header, payload, and signature)")
    splits = token.split(".")
    while splits and not splits[-1]:
        splits.pop()
    if len(splits) != 3:
        raise OAuthBearerValidationError(
            f"Malformed JWT provided ({token}); expected three sections (header, payload, and signature), but "
            f"{len(splits)} sections provided")
    for section, name in zip(splits, ("header", "payload", "signature"), strict=True):
        if not section.strip(_JAVA_WHITESPACE):
            raise OAuthBearerValidationError(
                f"Malformed JWT provided; expected at least three sections (header, payload, and signature), but "
                f"{name} section missing")


def _claim_string(name: str, value: str | None) -> str:
    """Kafka's ClaimValidationUtils.validateString: the trimmed value."""
    if value is None:
        raise OAuthBearerValidationError(f"{name} value must be non-null")
    if not value:
        raise OAuthBearerValidationError(f"{name} value must be non-empty")
    value = value.strip(_JAVA_WHITESPACE)
    if not value:
        raise OAuthBearerValidationError(f"{name} value must not contain only whitespace")
    return value


def _jwks_file(url: str) -> Path | None:
    """The JWKS file a `file:` URL names, None for an http URL on this host; ConfigError for any other URL."""
    name = SASL_OAUTHBEARER_JWKS_ENDPOINT_URL
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme:
        raise ConfigError(f"The OAuth configuration option {name} contains a URL ({url}) that is malformed: "
                          f"no protocol: {url}")
    if scheme == "file":
        path = Path(parts.path).absolute()
        if not path.exists():
            raise ConfigError(f"The OAuth configuration option {name} contains a file ({path}) that doesn't exist")
        if path.is_dir():
            raise ConfigError(f"The OAuth configuration option {name} references a directory ({path}), not a file")
        return path
    if scheme != "http" or parts.hostname not in _LOOPBACK_HOSTS:
        raise ConfigError(f"The OAuth configuration option {name} contains a URL ({url}) that is not served here: "
                          f"only file URLs and http URLs of {' or '.join(_LOOPBACK_HOSTS)} are")
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: it could lead away from this host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_PROXY_NO_REDIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
