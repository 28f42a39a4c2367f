"""A listener's security, built once from the broker's properties as that listener sees them (Kafka's ChannelBuilders).

The listener's security protocol (listener.security.protocol.map) says whether it speaks TLS and whether clients
authenticate with SASL. TLS takes the listener's ssl.* properties; SASL its `sasl.enabled.mechanisms` and, per
mechanism, `listener.name.<listener>.<mechanism>.sasl.jaas.config` (PLAIN's JAAS options hold the users and their
passwords, as in Kafka; SCRAM's credentials are the cluster's, from the metadata). A client's certificate names its
principal through `ssl.principal.mapping.rules`.
"""
from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from minikafka.broker.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from minikafka.broker.security.oauthbearer_sasl_server import JwksValidator, OAuthBearerValidator, UnsecuredValidator
from minikafka.broker.security.sasl_server import CredentialStore, ScramCredentials
from minikafka.broker.security.ssl_factory import TlsConnection, peer_principal_dn, server_ssl_context
from minikafka.broker.security.ssl_principal_mapper import SslPrincipalMapper
from minikafka.config import BrokerConfig, ConfigError

ANONYMOUS = "User:ANONYMOUS"
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
# The mechanisms served; GSSAPI (Kerberos), Kafka's default, is not.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# Kafka's validator of signed tokens (JWKS); without it, OAUTHBEARER validates unsecured tokens (Kafka's default).
JWKS_VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@dataclass(frozen=True)
class ListenerSecurity:
    listener: str
    protocol: str  # Kafka's SecurityProtocol name
    ssl_context: ssl.SSLContext | None
    principal_mapper: SslPrincipalMapper | None
    mechanisms: tuple[str, ...]
    credentials: CredentialStore
    reauth_ms: int  # connections.max.reauth.ms; 0: sessions never expire
    failed_authentication_delay_ms: int
    max_receive_bytes: int  # sasl.server.max.receive.size: a frame's bound until the client has authenticated
    refuses: Callable[[str], bool]  # a user whose authentications fail (the auth-failure fault)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def listener_security(config: BrokerConfig, listener: str, scram_credentials: ScramCredentials,
                      refuses: Callable[[str], bool] = lambda user: False) -> ListenerSecurity:
    """The security of `listener`; ConfigError, naming the property, for what Kafka would refuse at start."""
    protocol = config.security_protocol(listener)
    props = config.listener_props(listener)
    ssl_context = mapper = None
    if protocol in TLS_PROTOCOLS:
        ssl_context = server_ssl_context(props)
        mapper = SslPrincipalMapper.from_rules(props.get("ssl.principal.mapping.rules", "DEFAULT"))
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    oauthbearer: OAuthBearerValidator | None = None
    if protocol in SASL_PROTOCOLS:
        mechanisms = tuple(m.strip() for m in props.get("sasl.enabled.mechanisms", "GSSAPI").split(",") if m.strip())
        unsupported = [m for m in mechanisms if m not in MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {listener} holds "
                              f"{', '.join(unsupported) or 'none'}: the mechanisms served are {', '.join(MECHANISMS)}")
        for mechanism in mechanisms:
            name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            value = props.get(f"{mechanism.lower()}.sasl.jaas.config")
            if value is None:
                raise ConfigError(f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the "
                                  f"JAAS configuration: set {name}")
            modules = parse_jaas_config(value, name)
            if mechanism == "PLAIN":
                plain_users = CredentialStore.plain_users_from(
                    next((m for m in modules if m.class_name == PLAIN_LOGIN_MODULE), modules[0]))
            if mechanism == "OAUTHBEARER":
                oauthbearer = _oauthbearer_validator(props, modules[0].options, name)
    return ListenerSecurity(
        listener, protocol, ssl_context, mapper, mechanisms,
        CredentialStore(plain_users, scram_credentials, oauthbearer=oauthbearer),
        int(props.get("connections.max.reauth.ms", "0")),
        int(props.get("connection.failed.authentication.delay.ms", "100")),
        int(props.get("sasl.server.max.receive.size", "524288")), refuses)


def _oauthbearer_validator(props: dict[str, str], jaas_options: Mapping[str, str],
                           jaas_property: str) -> OAuthBearerValidator:
    """JWKS validation where the listener's OAUTHBEARER server callback handler is Kafka's validator class, else
    unsecured tokens as the JAAS options say (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler)."""
    handler = props.get("oauthbearer.sasl.server.callback.handler.class",
                        props.get("sasl.server.callback.handler.class", ""))
    if handler == JWKS_VALIDATOR_CLASS:
        return JwksValidator.from_properties(props)
    return UnsecuredValidator.from_jaas_options(jaas_options, jaas_property)


def ssl_principal(stream: TlsConnection, security: ListenerSecurity) -> str:
    """The principal of a TLS connection: its client certificate's name as the mapping rules make it, else
    ANONYMOUS (Kafka's DefaultKafkaPrincipalBuilder)."""
    dn = peer_principal_dn(stream)
    if dn is None or security.principal_mapper is None:
        return ANONYMOUS
    return f"User:{security.principal_mapper.get_name(dn)}"
