"""The security of the node's own connections (Kafka's ChannelBuilders.clientChannelBuilder): a broker's to the other
brokers, a ZooKeeper-mode controller's to the brokers, a broker's to its KRaft controller.

A connection is secured as the listener it goes to is: its security protocol (listener.security.protocol.map) and
that listener's properties as this node sees them (`listener.name.<listener>.<property>` over `<property>`). TLS
checks the server's certificate against the listener's truststore, and its host name unless
`ssl.endpoint.identification.algorithm` is empty; the listener's keystore, when set, is the client certificate
(for `ssl.client.auth=required`). SASL logs in with the mechanism `sasl.mechanism.inter.broker.protocol` names (to a
broker) or `sasl.mechanism.controller.protocol` (to a KRaft controller), with the node's own credentials from the
listener's `listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

from minikafka.broker.security.listener_security import SASL_PROTOCOLS, TLS_PROTOCOLS
from minikafka.broker.security.sasl_client import CLIENT_MECHANISMS, SaslClientLogin
from minikafka.broker.security.sasl_client_authenticator import SaslClientAuthenticator
from minikafka.broker.security.ssl_factory import client_ssl_context
from minikafka.config import LISTENER_PREFIX, BrokerConfig, ConfigError


@dataclass(frozen=True)
class ClientChannelSecurity:
    """How connections to one listener are secured: TLS (a client SSLContext) and SASL (this node's login); at least
    one of the two."""

    listener: str
    protocol: str  # Kafka's SecurityProtocol name
    ssl_context: ssl.SSLContext | None
    sasl_login: SaslClientLogin | None

    def sasl_authenticator(self) -> SaslClientAuthenticator | None:
        """A new authenticator, for one authentication (or re-authentication) of a connection; None without SASL."""
        return None if self.sasl_login is None else SaslClientAuthenticator(self.sasl_login.create_client())


def inter_broker_security(config: BrokerConfig) -> ClientChannelSecurity | None:
    """The security of connections to the other brokers (inter.broker.listener.name, or the listener
    security.inter.broker.protocol names); None where that listener is PLAINTEXT."""
    return client_security(config, config.inter_broker_listener_name, "sasl.mechanism.inter.broker.protocol")


def controller_security(config: BrokerConfig) -> ClientChannelSecurity | None:
    """The security of a broker's connections to its KRaft controller: to the first listener of
    controller.listener.names; None where that listener is PLAINTEXT."""
    names = config.controller_listener_names
    if not names:
        raise ConfigError("controller.listener.names must not be empty: a broker reaches its controller on the first "
                          "listener it names")
    return client_security(config, names[0], "sasl.mechanism.controller.protocol")


def client_security(config: BrokerConfig, listener: str, mechanism_property: str) -> ClientChannelSecurity | None:
    """The security of connections to `listener`, SASL with the mechanism `mechanism_property` names; ConfigError,
    naming the property, for what a connection could not be secured with."""
    protocol = config.security_protocol(listener)
    if protocol not in TLS_PROTOCOLS | SASL_PROTOCOLS:
        return None
    props = config.listener_props(listener)
    ssl_context = client_ssl_context(props) if protocol in TLS_PROTOCOLS else None
    login = None
    if protocol in SASL_PROTOCOLS:
        mechanism = config.get(mechanism_property)
        if mechanism not in CLIENT_MECHANISMS:
            raise ConfigError(f"{mechanism_property}={mechanism} is not supported: the broker's own connections "
                              f"authenticate with {', '.join(CLIENT_MECHANISMS)}")
        listener_property = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas_config = props.get(f"{mechanism.lower()}.sasl.jaas.config")
        property_name = listener_property
        if jaas_config is None:
            jaas_config, property_name = props.get("sasl.jaas.config"), "sasl.jaas.config"
        if jaas_config is None:
            raise ConfigError(f"No JAAS configuration for the {mechanism} login ({mechanism_property}) to listener "
                              f"{listener}: set {listener_property}")
        login = SaslClientLogin.from_jaas_config(mechanism, jaas_config, property_name)
    return ClientChannelSecurity(listener, protocol, ssl_context, login)
