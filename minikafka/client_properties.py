"""Kafka's client properties for the command line: `--command-config FILE` (as Kafka's tools take it) and
`-X key=value` (as kcat takes librdkafka's), turned into kafka-python's settings and the control client's security.

Both Java names and librdkafka's are understood where they differ: `sasl.jaas.config` (the username and password
of PlainLoginModule or ScramLoginModule) or `sasl.username` / `sasl.password`; `ssl.truststore.location` of type
PEM or `ssl.ca.location`; `ssl.keystore.location` of type PEM or `ssl.certificate.location` with `ssl.key.location`.
JKS and PKCS12 stores are for Java clients: here they are refused with a message saying to use PEM.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minikafka.broker.security.jaas import parse_jaas_config
from minikafka.handle_security import ClientSecurity
from minikafka.storage.properties import read_properties

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ClientPropertiesError(ValueError):
    """A client property the command line cannot honour; the message names it."""


def client_properties(command_config: str | Path | None, overrides: Mapping[str, str]) -> dict[str, str]:
    """The file's properties with the -X ones over them."""
    props = read_properties(command_config) if command_config else {}
    props.update(overrides)
    return props


def kafka_python_settings(props: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's constructor arguments for these properties' security (empty for PLAINTEXT)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientPropertiesError(f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    settings: dict[str, Any] = {}
    if protocol == "PLAINTEXT":
        return settings
    settings["security_protocol"] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        ca = _pem_location(props, "ssl.truststore", "ssl.ca.location")
        if ca:
            settings["ssl_cafile"] = ca
        certificate = _pem_location(props, "ssl.keystore", "ssl.certificate.location")
        if certificate:
            settings["ssl_certfile"] = certificate
            settings["ssl_keyfile"] = props.get("ssl.key.location", certificate)
        if props.get("ssl.key.password"):
            settings["ssl_password"] = props["ssl.key.password"]
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            settings["ssl_check_hostname"] = False
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ClientPropertiesError(f"sasl.mechanism={mechanism} is not supported here: use PLAIN, "
                                        "SCRAM-SHA-256 or SCRAM-SHA-512")
        username, password = _sasl_credentials(props)
        settings.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    return settings


def control_security(props: Mapping[str, str]) -> ClientSecurity | None:
    """How the control client (`minikafka fault`) reaches a secured listener: TLS with the CA, SASL with PLAIN or
    SCRAM."""
    settings = kafka_python_settings(props)
    protocol = settings.get("security_protocol")
    if protocol is None:
        return None
    return ClientSecurity(protocol, settings.get("ssl_cafile"), settings.get("sasl_plain_username"),
                          settings.get("sasl_plain_password"), settings.get("sasl_mechanism", "PLAIN"))


def _pem_location(props: Mapping[str, str], store: str, librdkafka_name: str) -> str | None:
    location = props.get(f"{store}.location")
    if location:
        store_type = props.get(f"{store}.type", "JKS").upper()
        if store_type != "PEM":
            raise ClientPropertiesError(f"{store}.type={store_type}: the command line reads PEM stores only; set "
                                        f"{store}.type=PEM with a PEM file, or {librdkafka_name}")
        return location
    return props.get(librdkafka_name)


def _sasl_credentials(props: Mapping[str, str]) -> tuple[str, str]:
    jaas = props.get("sasl.jaas.config")
    if jaas:
        modules = parse_jaas_config(jaas, "sasl.jaas.config")
        options = modules[0].options
        if "username" not in options or "password" not in options:
            raise ClientPropertiesError("sasl.jaas.config must give username and password")
        return options["username"], options["password"]
    if "sasl.username" in props and "sasl.password" in props:
        return props["sasl.username"], props["sasl.password"]
    raise ClientPropertiesError("SASL needs sasl.jaas.config (username and password) or sasl.username and "
                                "sasl.password")
