import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from minikafka.broker.security.oauthbearer_sasl_server import (
    JwksValidator,
    OAuthBearerSaslServer,
    OAuthBearerValidationError,
    UnsecuredValidator,
)
from minikafka.broker.security.sasl_server import (
    CredentialStore,
    SaslAuthenticationError,
    SaslError,
    ScramCredentials,
    create_sasl_server,
)
from minikafka.config import ConfigError

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
INVALID_TOKEN = '{"status":"invalid_token"}'
JAAS_PROPERTY = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"


def b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_token(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """An unsecured JWS as librdkafka makes it for `sasl.oauthbearer.config=principal=alice`."""
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}."


def alice(**claims: Any) -> str:
    return unsecured_token({"sub": "alice", "iat": NOW_S, "exp": NOW_S + 3600, **claims})


def initial_response(token: str, authzid: str = "", extensions: dict[str, str] | None = None) -> bytes:
    """The client's message as Kafka's and librdkafka's clients send it."""
    kvpairs = "".join(f"\x01{key}={value}" for key, value in (extensions or {}).items())
    authzid_part = f"a={authzid}" if authzid else ""
    return f"n,{authzid_part},\x01auth=Bearer {token}{kvpairs}\x01\x01".encode()


def unsecured(**options: str) -> UnsecuredValidator:
    validator = UnsecuredValidator.from_jaas_options(options, JAAS_PROPERTY)
    return UnsecuredValidator(validator.principal_claim_name, validator.scope_claim_name, validator.required_scope,
                              validator.allowable_clock_skew_ms, now_ms=lambda: NOW_MS)


def failure_of(server: OAuthBearerSaslServer, response: bytes) -> str:
    """The message the client is told after the two-step failure exchange."""
    challenge = server.evaluate_response(response)
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate_response(b"\x01")
    assert str(failure.value) == challenge.decode()
    return str(failure.value)


# The SASL exchange.

def test_unsecured_token_authenticates_through_create_sasl_server() -> None:
    credentials = CredentialStore({}, ScramCredentials(dict), unsecured())
    server = create_sasl_server("OAUTHBEARER", credentials)
    assert server.credential_expiry_ms is None
    assert server.evaluate_response(initial_response(alice())) == b""
    assert server.complete
    assert server.authorization_id == "alice"
    assert server.credential_expiry_ms == (NOW_S + 3600) * 1000


def test_create_sasl_server_needs_a_validator() -> None:
    with pytest.raises(ValueError, match="OAUTHBEARER"):
        create_sasl_server("OAUTHBEARER", CredentialStore({}, ScramCredentials(dict)))


def test_authorization_id_before_completion_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="has not completed"):
        _ = OAuthBearerSaslServer(unsecured()).authorization_id


def test_matching_authzid_and_extensions_are_accepted() -> None:
    server = OAuthBearerSaslServer(unsecured())
    server.evaluate_response(initial_response(alice(), authzid="alice", extensions={"traceId": "abc 123"}))
    assert server.authorization_id == "alice"


def test_authzid_other_than_the_principal_fails() -> None:
    server = OAuthBearerSaslServer(unsecured())
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate_response(initial_response(alice(), authzid="bob"))
    assert str(failure.value) == ("Authentication failed: Client requested an authorization id (bob) that is "
                                  "different from the token's principal name (alice)")


def test_invalid_token_fails_after_the_client_acknowledges_the_error() -> None:
    server = OAuthBearerSaslServer(unsecured())
    assert failure_of(server, initial_response(alice(exp=NOW_S - 1))) == INVALID_TOKEN


def test_missing_scope_is_reported_with_the_scope_required() -> None:
    server = OAuthBearerSaslServer(unsecured(unsecuredValidatorRequiredScope="read  write"))
    message = failure_of(server, initial_response(alice(scope=["read"])))
    assert message == '{"status":"insufficient_scope", "scope":"[read, write]"}'


def test_a_new_first_message_after_an_error_starts_again() -> None:
    server = OAuthBearerSaslServer(unsecured())
    assert server.evaluate_response(initial_response(alice(exp=NOW_S))) == INVALID_TOKEN.encode()
    assert server.evaluate_response(initial_response(alice())) == b""
    assert server.authorization_id == "alice"


def test_kvsep_without_an_error_is_a_malformed_message() -> None:
    with pytest.raises(SaslError, match="^Invalid OAUTHBEARER client first message$"):
        OAuthBearerSaslServer(unsecured()).evaluate_response(b"\x01")


@pytest.mark.parametrize(("response", "message"), [
    (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01traceId=1\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer abc\x01", "Invalid OAUTHBEARER client first message"),  # no final kvsep
    (b"n,,auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),  # no kvsep after the gs2 header
    (b"y,,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,a=al,ice,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer abc\x01trace-id=1\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer \xff\xfe\x01\x01", "Invalid OAUTHBEARER client first message"),  # not UTF-8
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Bearer a b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
])
def test_malformed_first_messages(response: bytes, message: str) -> None:
    with pytest.raises(SaslError) as failure:
        OAuthBearerSaslServer(unsecured()).evaluate_response(response)
    assert str(failure.value) == message


def test_oversized_first_message() -> None:
    with pytest.raises(SaslError, match="the most read is"):
        OAuthBearerSaslServer(unsecured()).evaluate_response(initial_response("a" * 70000))


def test_scheme_is_case_insensitive() -> None:
    server = OAuthBearerSaslServer(unsecured())
    server.evaluate_response(initial_response(alice()).replace(b"Bearer", b"bEARER"))
    assert server.complete


# The unsecured validator (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler).

def refusal(validator: UnsecuredValidator | JwksValidator, token: str) -> str:
    with pytest.raises(OAuthBearerValidationError) as failure:
        validator.validate(token)
    return str(failure.value)


def test_unsecured_token_validates() -> None:
    token = unsecured().validate(alice(scope="read write"))
    assert (token.principal_name, token.lifetime_ms, token.scope) == ("alice", (NOW_S + 3600) * 1000,
                                                                      frozenset({"read write"}))


def test_expired_token() -> None:
    assert refusal(unsecured(), alice(exp=NOW_S)) == (
        f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after the Expiration Time "
        f"value ({NOW_S:f} seconds)")


def test_token_issued_in_the_future() -> None:
    assert refusal(unsecured(), alice(iat=NOW_S + 1)) == (
        f"The Issued At value ({NOW_S + 1:f} seconds) was after the indicated time ({NOW_MS} ms) plus allowable "
        "clock skew (0 ms)")


def test_a_token_issued_within_the_current_millisecond_is_not_from_the_future() -> None:
    """Claims are compared as Kafka reads them, rounded to milliseconds: an `iat` with more decimals than a
    millisecond, in the very ms of the check, is not after it."""
    assert unsecured().validate(alice(iat=NOW_MS / 1000 + 0.0004)).principal_name == "alice"


def test_clock_skew_allows_a_just_expired_token_and_a_just_issued_one() -> None:
    validator = unsecured(unsecuredValidatorAllowableClockSkewMs="2000")
    assert validator.validate(alice(iat=NOW_S - 60, exp=NOW_S - 1)).principal_name == "alice"
    assert validator.validate(alice(iat=NOW_S + 2)).principal_name == "alice"
    assert "was on or after the Expiration Time" in refusal(validator, alice(iat=NOW_S - 60, exp=NOW_S - 2))


@pytest.mark.parametrize(("claims", "message"), [
    ({"iat": NOW_S, "exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
    ({"sub": " ", "exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
    ({"sub": 7, "exp": NOW_S + 60}, "The 'sub' claim was not of type String: Integer"),
    ({"sub": "alice"}, "No expiration time in JWT"),
    ({"sub": "alice", "exp": "soon"}, "The 'exp' claim was not of type Number: String"),
    ({"sub": "alice", "exp": NOW_S + 60, "scope": 1}, "The 'scope' claim was not of type List: Integer"),
    ({"sub": "alice", "iat": NOW_S - 7200, "exp": NOW_S - 3600},
     f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after the Expiration Time "
     f"value ({NOW_S - 3600:f} seconds)"),
])
def test_claims_checked_as_kafka_does(claims: dict[str, Any], message: str) -> None:
    assert refusal(unsecured(), unsecured_token(claims)) == message


def test_expiration_not_after_issued_at() -> None:
    validator = unsecured(unsecuredValidatorAllowableClockSkewMs="10000")
    assert refusal(validator, alice(iat=NOW_S + 5, exp=NOW_S + 5)) == (
        f"The Expiration Time time ({NOW_S + 5:f} seconds) was not after the Issued At time ({NOW_S + 5:f} seconds)")


@pytest.mark.parametrize(("token", "message"), [
    (f"{b64url({'alg': 'RS256'})}.{b64url({'sub': 'alice'})}.", "Unsecured JWS must have 'none' for an algorithm"),
    (f"{b64url({'typ': 'JWT'})}.{b64url({'sub': 'alice'})}.", "JWS header must have an Algorithm value"),
    (alice() + "c2ln", "Unsecured JWS must not contain a digital signature"),
    (alice()[:-1], "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    (alice() + "c2ln.c2ln", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    ("a..b", "Malformed compact serialization contains '..'"),
    ("a!.b.", "malformed Base64 URL encoded value"),
    (f"{b64url({'alg': 'none'})}.bm90IGpzb24.", "malformed JSON"),
])
def test_malformed_unsecured_jws(token: str, message: str) -> None:
    assert refusal(unsecured(), token) == message


def test_principal_and_scope_claim_names() -> None:
    validator = unsecured(unsecuredValidatorPrincipalClaimName="client_id", unsecuredValidatorScopeClaimName="scp",
                          unsecuredValidatorRequiredScope="kafka")
    token = validator.validate(unsecured_token({"client_id": "svc", "scp": ["kafka", " ", "x"], "exp": NOW_S + 9}))
    assert (token.principal_name, token.scope) == ("svc", frozenset({"kafka", "x"}))
    assert refusal(validator, unsecured_token({"client_id": "svc", "scp": ["x"], "exp": NOW_S + 9})) == (
        "The provided scope ([x]) was missing a required scope (kafka).  All required scope elements: [kafka]")


@pytest.mark.parametrize(("options", "message"), [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "Allowable clock skew millis must not be negative: -1"),
    ({"unsecuredValidatorAllowableClockSkewMs": "soon"}, 'For input string: "soon"'),
    ({"unsecuredValidatorRequiredScope": "read wr\"ite"}, 'Invalid scope value: wr"ite'),
])
def test_jaas_options_kafka_refuses(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        UnsecuredValidator.from_jaas_options(options, JAAS_PROPERTY)
    assert str(failure.value) == f"Invalid value for configuration {JAAS_PROPERTY}: {message}"


# The JWKS validator (Kafka's OAuthBearerValidatorCallbackHandler).

@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "use": "sig"}


def signed(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str, algorithm: str = "RS256",
           **claims: Any) -> str:
    """A JWT as an identity provider signs it; a claim given as None is left out."""
    now = int(time.time())
    payload = {"sub": "alice", "iat": now, "exp": now + 3600, "iss": "https://idp", "aud": "kafka",
               "scope": ["produce", "consume"], **claims}
    return jwt.encode({name: value for name, value in payload.items() if value is not None}, key,
                      algorithm=algorithm, headers={"kid": kid})


@pytest.fixture
def jwks_file(tmp_path: Path, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public_jwk(rsa_key, "rsa-1"), public_jwk(ec_key, "ec-1")]}))
    return path


@pytest.fixture
def jwks(jwks_file: Path) -> JwksValidator:
    return JwksValidator.from_properties({JWKS_URL: jwks_file.as_uri(),
                                          "sasl.oauthbearer.expected.audience": "other, kafka",
                                          "sasl.oauthbearer.expected.issuer": "https://idp"})


def test_signed_token_validates(jwks: JwksValidator, rsa_key: rsa.RSAPrivateKey) -> None:
    exp = int(time.time()) + 600
    token = jwks.validate(signed(rsa_key, "rsa-1", exp=exp))
    assert (token.principal_name, token.lifetime_ms, token.scope) == ("alice", exp * 1000,
                                                                      frozenset({"produce", "consume"}))


def test_es256_token_validates(jwks: JwksValidator, ec_key: ec.EllipticCurvePrivateKey) -> None:
    assert jwks.validate(signed(ec_key, "ec-1", "ES256")).principal_name == "alice"


@pytest.mark.parametrize(("token_of", "message"), [
    (lambda keys: signed(keys["other"], "rsa-1"), "Could not validate the access token: Signature verification failed"),
    (lambda keys: signed(keys["rsa"], "rsa-2"), "Unable to find a suitable verification key"),
    (lambda keys: signed(keys["rsa"], "ec-1"), "Unable to find a suitable verification key"),  # an RSA alg, an EC key
    (lambda keys: signed(keys["rsa"], "rsa-1", aud="nobody"), "Audience doesn't match"),
    (lambda keys: signed(keys["rsa"], "rsa-1", iss="https://evil"), "Invalid issuer"),
    (lambda keys: signed(keys["rsa"], "rsa-1", exp=int(time.time()) - 60), "Signature has expired"),
    (lambda keys: signed(keys["rsa"], "rsa-1", iat=None), 'Token is missing the "iat" claim'),
    (lambda keys: signed(keys["rsa"], "rsa-1", sub=None), "sub value must be non-null"),
    (lambda keys: signed(keys["rsa"], "rsa-1", sub=" "), "sub value must not contain only whitespace"),
    (lambda keys: signed(keys["rsa"], "rsa-1", scope=["a", "a "]), "scope value must not contain duplicates"),
    (lambda keys: unsecured_token({"sub": "alice", "exp": int(time.time()) + 60}),
     "but 2 sections provided"),  # Java's split drops the empty signature
    (lambda keys: "a.b", "expected three sections (header, payload, and signature), but 2 sections provided"),
])
def test_signed_tokens_refused(jwks: JwksValidator, rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey,
                               token_of: Any, message: str) -> None:
    assert message in refusal(jwks, token_of({"rsa": rsa_key, "other": other_rsa_key}))


def test_clock_skew_allows_a_just_expired_token(jwks: JwksValidator, rsa_key: rsa.RSAPrivateKey) -> None:
    assert jwks.validate(signed(rsa_key, "rsa-1", exp=int(time.time()) - 10)).principal_name == "alice"


def test_alg_none_is_refused_whatever_the_key(jwks_file: Path) -> None:
    jwks = JwksValidator(jwks_file.as_uri())
    token = f"{b64url({'alg': 'none', 'kid': 'rsa-1'})}.{b64url({'sub': 'alice', 'exp': 2**33})}.c2ln"
    assert "Unable to find a suitable verification key" in refusal(jwks, token)


def test_a_token_with_an_audience_needs_one_configured(jwks_file: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    jwks = JwksValidator.from_properties({JWKS_URL: jwks_file.as_uri()})
    assert "Invalid audience" in refusal(jwks, signed(rsa_key, "rsa-1"))
    assert jwks.validate(signed(rsa_key, "rsa-1", aud=None, iss=None)).principal_name == "alice"


def test_mechanism_prefixed_properties_and_claim_names(jwks_file: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    jwks = JwksValidator.from_properties({
        f"oauthbearer.{JWKS_URL}": jwks_file.as_uri(), JWKS_URL: "https://ignored",
        "sasl.oauthbearer.sub.claim.name": "client_id", "sasl.oauthbearer.scope.claim.name": "scp",
        "sasl.oauthbearer.expected.audience": "kafka"})
    token = jwks.validate(signed(rsa_key, "rsa-1", sub=7, client_id=" svc ", scp="kafka"))
    assert (token.principal_name, token.scope) == ("svc", frozenset({"kafka"}))


def test_refused_signed_token_through_the_sasl_exchange(jwks: JwksValidator, other_rsa_key: rsa.RSAPrivateKey) -> None:
    assert failure_of(OAuthBearerSaslServer(jwks), initial_response(signed(other_rsa_key, "rsa-1"))) == INVALID_TOKEN


@pytest.mark.parametrize("url", ["https://127.0.0.1/jwks", "http://10.0.0.1/jwks", "http://example.com/jwks",
                                 "http://127.0.0.1.example.com/jwks", "ftp://localhost/jwks", "jwks.json"])
def test_urls_not_served_are_refused(url: str) -> None:
    with pytest.raises(ConfigError, match=JWKS_URL):
        JwksValidator.from_properties({JWKS_URL: url})


@pytest.mark.parametrize("props", [{}, {JWKS_URL: " "}])
def test_jwks_url_is_required(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=f"{JWKS_URL} value must be non-null"):
        JwksValidator.from_properties(props)


def test_unreadable_jwks_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="that doesn't exist"):
        JwksValidator((tmp_path / "none.json").as_uri())
    with pytest.raises(ConfigError, match="references a directory"):
        JwksValidator(tmp_path.as_uri())
    (tmp_path / "empty.json").write_text('{"keys": []}')
    with pytest.raises(ConfigError, match=f"{JWKS_URL}.*not a JWKS"):
        JwksValidator((tmp_path / "empty.json").as_uri())


def test_bad_clock_skew_is_refused(jwks_file: Path) -> None:
    with pytest.raises(ConfigError, match="sasl.oauthbearer.clock.skew.seconds"):
        JwksValidator.from_properties({JWKS_URL: jwks_file.as_uri(), "sasl.oauthbearer.clock.skew.seconds": "x"})


class JwksServer:
    """A JWKS endpoint on 127.0.0.1 whose keys a test changes, counting its requests."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.requests = 0
        jwks_server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                jwks_server.requests += 1
                body = json.dumps({"keys": jwks_server.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()


@pytest.fixture
def jwks_server(rsa_key: rsa.RSAPrivateKey) -> Iterator[JwksServer]:
    server = JwksServer([public_jwk(rsa_key, "rsa-1")])
    yield server
    server.stop()


def test_jwks_over_http(jwks_server: JwksServer, rsa_key: rsa.RSAPrivateKey,
                        ec_key: ec.EllipticCurvePrivateKey) -> None:
    jwks = JwksValidator.from_properties({JWKS_URL: jwks_server.url, "sasl.oauthbearer.expected.audience": "kafka"})
    assert jwks_server.requests == 1
    assert jwks.validate(signed(rsa_key, "rsa-1")).principal_name == "alice"
    assert jwks_server.requests == 1
    # A key added to the endpoint is fetched, in the background, by the first token naming it (which fails, as
    # with Kafka's expedited refresh); a token after the fetch passes...
    jwks_server.keys.append(public_jwk(ec_key, "ec-1"))
    ec_token = signed(ec_key, "ec-1", "ES256")
    assert "Unable to find a suitable verification key" in refusal(jwks, ec_token)
    deadline = time.monotonic() + 10
    while jwks_server.requests < 2 or jwks._refresh_thread.is_alive():
        assert time.monotonic() < deadline, "the JWKS was never fetched again"
        time.sleep(0.01)
    assert jwks.validate(ec_token).principal_name == "alice"
    assert jwks_server.requests == 2
    # ...and a key id the endpoint does not have is fetched for once a minute at most.
    for _ in range(2):
        assert "Unable to find a suitable verification key" in refusal(jwks, signed(rsa_key, "rsa-2"))
    jwks._refresh_thread.join(10)
    assert jwks_server.requests == 3


def test_jwks_endpoint_down_at_start_is_a_config_error(jwks_server: JwksServer) -> None:
    url = jwks_server.url
    jwks_server.stop()
    with pytest.raises(ConfigError, match=JWKS_URL):
        JwksValidator(url)
