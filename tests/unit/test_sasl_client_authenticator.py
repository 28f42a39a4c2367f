"""The client side of SASL (the broker's own connections) against the server side, request by request: every
mechanism authenticates, every refusal is an AuthenticationError with Kafka's message, the session lifetime is
read for re-authentication, and the logins come from the listener's JAAS configuration as Kafka reads them."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from minikafka.broker.security import scram
from minikafka.broker.security.client_security import (
    controller_security,
    inter_broker_security,
)
from minikafka.broker.security.listener_security import listener_security
from minikafka.broker.security.sasl_client import (
    OAuthBearerSaslClient,
    PlainSaslClient,
    SaslClient,
    SaslClientLogin,
    ScramSaslClient,
    unsecured_token,
)
from minikafka.broker.security.sasl_client_authenticator import AuthenticationError, SaslClientAuthenticator
from minikafka.broker.security.sasl_server import ScramCredentials
from minikafka.broker.security.sasl_server_authenticator import SaslServerAuthenticator
from minikafka.broker.security.scram import SaslError, ScramMechanism
from minikafka.config import BrokerConfig, ConfigError
from minikafka.protocol import codec

LISTENER = "SASL_PLAINTEXT"
PREFIX = f"listener.name.{LISTENER.lower()}."
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
SCRAM_CREDENTIALS = {("admin", m.type_id): scram.generate_credential(m, "admin-secret") for m in ScramMechanism}


def broker_config(**overrides: str) -> BrokerConfig:
    """A broker whose one listener is SASL_PLAINTEXT, its inter-broker listener too, with the admin's PLAIN login."""
    return BrokerConfig({
        "listeners": f"{LISTENER}://127.0.0.1:0", "sasl.enabled.mechanisms": MECHANISMS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        f"{PREFIX}plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="admin" password="admin-secret" user_admin="admin-secret";',
        f"{PREFIX}scram-sha-256.sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="admin-secret";',
        f"{PREFIX}scram-sha-512.sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="admin-secret";',
        f"{PREFIX}oauthbearer.sasl.jaas.config":
            f'{OAUTHBEARER_MODULE} required unsecuredLoginStringClaim_sub="admin" '
            'unsecuredLoginListClaim_scope=",kafka,admin" unsecuredValidatorRequiredScope="kafka";',
        **overrides})


def server_of(config: BrokerConfig) -> SaslServerAuthenticator:
    security = listener_security(config, LISTENER, ScramCredentials(lambda: SCRAM_CREDENTIALS))
    return SaslServerAuthenticator(security, "127.0.0.1:50000")


def exchange(client: SaslClientAuthenticator, server: SaslServerAuthenticator) -> int:
    """Run the exchange over the wire format, each request framed as the network client frames it and each answer
    decoded as it decodes it; returns how many requests went."""
    request: Any = client.handshake_request()
    sent = 0
    while request is not None:
        schema, version = codec.SCHEMAS[request.API_KEY], request.API_VERSION
        sent += 1
        step = server.take(codec.encode_request(schema, version, sent, "broker-1-fetcher-0", request)[4:])
        assert step is not None and step.response is not None
        request = client.receive(codec.decode_response(schema, version, step.response[4:]))
    return sent


def login_of(config: BrokerConfig) -> SaslClientAuthenticator:
    security = inter_broker_security(config)
    assert security is not None
    authenticator = security.sasl_authenticator()
    assert authenticator is not None
    return authenticator


@pytest.mark.parametrize(("mechanism", "requests"), [("PLAIN", 2), ("SCRAM-SHA-256", 3), ("SCRAM-SHA-512", 3),
                                                     ("OAUTHBEARER", 2)])
def test_each_mechanism_logs_in_with_the_listener_jaas_login(mechanism, requests):
    config = broker_config(**{"sasl.mechanism.inter.broker.protocol": mechanism})
    client, server = login_of(config), server_of(config)
    assert exchange(client, server) == requests
    assert client.complete and client.mechanism == mechanism
    assert server.authenticated and server.principal == "User:admin"
    # Without connections.max.reauth.ms a session ends only with its credential: an OAUTHBEARER token's hour.
    if mechanism == "OAUTHBEARER":
        assert 3_590_000 < client.session_lifetime_ms <= 3_600_000
    else:
        assert client.session_lifetime_ms == 0


def test_oauthbearer_token_carries_the_login_claims():
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "admin", "unsecuredLoginListClaim_scope": "|a|b",
                             "unsecuredLoginNumberClaim_rank": "2", "unsecuredLoginLifetimeSeconds": "60"},
                            "sasl.jaas.config", now_s=1000.5)
    header, claims, signature = token.split(".")
    assert signature == ""
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {
        "exp": 1060.5, "iat": 1000.5, "sub": "admin", "scope": ["a", "b"], "rank": 2.0}


def test_a_wrong_plain_password_is_refused_with_the_server_message():
    server = server_of(broker_config())
    client = SaslClientAuthenticator(PlainSaslClient("admin", "wrong"))
    with pytest.raises(AuthenticationError, match="^Authentication failed: Invalid username or password$"):
        exchange(client, server)
    assert not client.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_wrong_scram_password_is_refused(mechanism):
    client = SaslClientAuthenticator(ScramSaslClient(mechanism, "admin", "wrong"))
    with pytest.raises(AuthenticationError, match="due to invalid credentials with SASL mechanism "
                                                  f"{mechanism.mechanism_name}$"):
        exchange(client, server_of(broker_config()))


def test_a_refused_oauthbearer_token_is_acknowledged_and_fails_with_the_json_status():
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "admin"}, "sasl.jaas.config")  # no scope
    client = SaslClientAuthenticator(OAuthBearerSaslClient(token, {}))
    with pytest.raises(AuthenticationError, match='"status":"insufficient_scope"'):
        exchange(client, server_of(broker_config()))


def test_a_mechanism_the_listener_does_not_enable_names_those_it_does():
    server = server_of(broker_config(**{"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol":
                                        "PLAIN"}))
    client = SaslClientAuthenticator(ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "admin", "admin-secret"))
    with pytest.raises(AuthenticationError, match=r"^Client SASL mechanism 'SCRAM-SHA-256' not enabled in the "
                                                  r"server, enabled mechanisms are \[PLAIN\]$"):
        exchange(client, server)


def test_the_session_lifetime_is_read_and_the_session_renewed_on_the_same_connection():
    config = broker_config(**{"connections.max.reauth.ms": "60000"})
    server = server_of(config)
    first = login_of(config)
    exchange(first, server)
    assert first.session_lifetime_ms == 60000
    renewed = login_of(config)  # KIP-368: a new authentication on the authenticated connection
    exchange(renewed, server)
    assert renewed.complete and server.authenticated and server.principal == "User:admin"


class _Tampered:
    """A SCRAM client whose server's final message carries another signature: a server without the credential."""

    def __init__(self, client: ScramSaslClient) -> None:
        self._client = client
        self.mechanism = client.mechanism

    @property
    def complete(self) -> bool:
        return self._client.complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if challenge.startswith(b"v="):
            challenge = b"v=" + base64.b64encode(b"\0" * 32)
        return self._client.evaluate_challenge(challenge)


def test_a_server_signature_that_proves_nothing_fails_the_scram_client():
    tampered: SaslClient = _Tampered(ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "admin", "admin-secret"))
    client = SaslClientAuthenticator(tampered)
    with pytest.raises(AuthenticationError, match="Invalid server signature"):
        exchange(client, server_of(broker_config()))
    assert not client.complete


def test_the_scram_client_checks_the_server_nonce_and_iterations_and_reads_errors():
    client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "a=b,c", "secret")
    first = client.evaluate_challenge(b"")
    assert first is not None and first.startswith(b"n,,n=a=3Db=2Cc,r=")
    with pytest.raises(SaslError, match="does not start with client nonce"):
        client.evaluate_challenge(b"r=other,s=c2FsdA==,i=4096")
    low = ScramSaslClient(ScramMechanism.SCRAM_SHA_512, "admin", "secret")
    nonce = (low.evaluate_challenge(b"") or b"").decode().rpartition("r=")[2]
    with pytest.raises(SaslError, match="is less than the minimum 4096"):
        low.evaluate_challenge(f"r={nonce}x,s=c2FsdA==,i=1000".encode())
    assert scram.ServerFinalMessage.parse(b"e=invalid-proof").error == "invalid-proof"
    with pytest.raises(SaslError, match="Invalid SCRAM server final message format"):
        scram.ServerFinalMessage.parse(b"x=1")


# The logins, from the listener's properties.

def test_no_security_for_a_plaintext_listener():
    assert inter_broker_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})) is None


def test_an_inter_broker_mechanism_the_listener_does_not_enable_fails_validation():
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol must be included in "
                                          "sasl.enabled.mechanisms .*GSSAPI is not among the mechanisms of the "
                                          "inter-broker listener SASL_PLAINTEXT"):
        broker_config(**{"sasl.mechanism.inter.broker.protocol": "GSSAPI"})


def test_gssapi_is_not_a_mechanism_of_the_broker_own_connections():
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol=GSSAPI is not supported"):
        inter_broker_security(broker_config(**{"sasl.enabled.mechanisms": "GSSAPI,PLAIN",
                                               "sasl.mechanism.inter.broker.protocol": "GSSAPI"}))


def test_the_login_needs_username_and_password_and_names_the_property():
    config = broker_config(**{f"{PREFIX}plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_admin="secret";'})
    with pytest.raises(ConfigError, match=f"{PREFIX}plain.sasl.jaas.config: the broker's own PLAIN login needs the "
                                          "options username and password"):
        inter_broker_security(config)


def test_sasl_jaas_config_serves_when_the_listener_has_no_mechanism_entry():
    config = broker_config(**{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                              f"{PREFIX}scram-sha-512.sasl.jaas.config": "",
                              "sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="admin-secret";'})
    del config.props[f"{PREFIX}scram-sha-512.sasl.jaas.config"]
    security = inter_broker_security(config)
    assert security is not None and security.sasl_login is not None
    assert security.sasl_login.property_name == "sasl.jaas.config"
    del config.props["sasl.jaas.config"]
    with pytest.raises(ConfigError, match=f"set {PREFIX}scram-sha-512.sasl.jaas.config"):
        inter_broker_security(config)


def test_an_oauthbearer_login_needs_its_principal_claim():
    with pytest.raises(ConfigError, match="No principal name in JWT claim: sub"):
        SaslClientLogin.from_jaas_config("OAUTHBEARER", f"{OAUTHBEARER_MODULE} required;", "sasl.jaas.config")
    with pytest.raises(ConfigError, match="Cannot explicitly set the 'exp' claim"):
        SaslClientLogin.from_jaas_config(
            "OAUTHBEARER", f'{OAUTHBEARER_MODULE} required unsecuredLoginStringClaim_sub="a" '
                           'unsecuredLoginNumberClaim_exp="1";', "sasl.jaas.config")


def test_the_controller_listener_has_its_own_mechanism_and_properties():
    config = BrokerConfig({
        "process.roles": "broker", "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0",
        "controller.quorum.bootstrap.servers": "127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
        "listener.name.controller.scram-sha-256.sasl.jaas.config":
            f'{SCRAM_MODULE} required username="broker" password="broker-secret";'})
    assert inter_broker_security(config) is None
    security = controller_security(config)
    assert security is not None and security.listener == "CONTROLLER" and security.ssl_context is None
    assert security.sasl_login is not None and security.sasl_login.mechanism == "SCRAM-SHA-256"
    del config.props["sasl.mechanism.controller.protocol"]  # Kafka's default, GSSAPI
    with pytest.raises(ConfigError, match="sasl.mechanism.controller.protocol=GSSAPI is not supported"):
        controller_security(config)
