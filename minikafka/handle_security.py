"""Security for a test's broker: certificates made for it, users, and the configuration each client needs.

    with minikafka.Broker(security="SASL_SSL", users={"alice": "secret"}) as broker:
        producer = confluent_kafka.Producer(broker.client_config(user="alice"))

A CA and a server certificate for the broker's host (trustme) are made in a directory of their own; the broker's
listener speaks the chosen protocol with Kafka's own properties (a PEM keystore, PLAIN users in the listener's JAAS
configuration), and an `admin` user with a generated password is always there for the handle's own connections.
That listener is the inter-broker listener too, and a cluster's controller listener is secured the same way: the
brokers log in to each other and to the controller as `admin` with PLAIN, whose users are in the JAAS
configuration from the first start (SCRAM's come from the metadata, once a broker runs), and present the server
certificate as their client certificate where `ssl_client_auth` asks for one. No listener stays plaintext.
`client_config` gives the settings by each client's names: confluent-kafka (librdkafka), kafka-python, aiokafka,
and Java client properties as text (the CA as a PEM truststore).
"""
from __future__ import annotations

import base64
import json
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikafka.acl import Acl, create_acls, delete_acls

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENTS = ("confluent", "kafka-python", "aiokafka", "java")
ADMIN = "admin"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# How brokers log in to each other and to the controller: the admin's PLAIN login, in the JAAS configuration.
INTER_BROKER_MECHANISM = "PLAIN"


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unsecured_token(principal: str, lifetime_s: float = 3600.0) -> str:
    """An unsecured JWS (`alg: none`) for `principal`, as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes
    them: what the broker's default OAUTHBEARER validator accepts."""
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    issued = int(time.time() * 1000) / 1000  # Kafka's: milliseconds, in seconds
    return f"{part({'alg': 'none'})}.{part({'sub': principal, 'iat': issued, 'exp': issued + lifetime_s})}."


def _token_provider(client: str, principal: str) -> Any:
    """kafka-python's or aiokafka's token provider, a fresh unsecured token for each connection."""
    if client == "aiokafka":
        from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider

        class AsyncUnsecuredTokens(AsyncTokenProvider):
            async def token(self) -> str:
                return unsecured_token(principal)

        return AsyncUnsecuredTokens()
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class UnsecuredTokens(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_token(principal)

    return UnsecuredTokens()


TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ClientSecurity:
    """How one of the handle's own clients connects: the protocol, the CA file and the admin's credentials."""

    protocol: str
    ca_file: str | None
    username: str | None
    password: str | None
    mechanism: str = "PLAIN"  # the SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


class HandleSecurity:
    """The security of one handle's client listener; files live until `close()`."""

    def __init__(self, protocol: str, users: Mapping[str, str] | None, host: str,
                 ssl_client_auth: str = "none", directory: Path | None = None,
                 acls: Sequence[Acl] | None = None) -> None:
        """`directory` keeps the certificates (made there once, kept after close); default a temporary one.
        `acls` (even empty) turns Kafka's StandardAuthorizer on, with `admin` its super user."""
        if protocol not in PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        if acls is not None and protocol not in SASL_PROTOCOLS:
            raise ValueError("acls need a SASL listener (security='SASL_PLAINTEXT' or 'SASL_SSL'): users are "
                             "authorized by the principal they authenticate as")
        if ssl_client_auth not in ("none", "requested", "required"):
            raise ValueError("ssl_client_auth must be none, requested or required")
        self.protocol = protocol
        self.ssl_client_auth = ssl_client_auth
        self.users = {ADMIN: secrets.token_urlsafe(16), **(users or {})}
        self._dir: Path | None = None
        self._keep_dir = directory is not None
        self._scram_added = False
        self.acls = None if acls is None else list(acls)
        self._acls_added = False
        self.ca_file: Path | None = None
        self._server_pem: Path | None = None
        self._ca: Any = None  # trustme's CA, when this handle made the certificates
        if self.tls:
            self._make_certificates(host, directory)

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def _make_certificates(self, host: str, directory: Path | None) -> None:
        import trustme  # lazy: only handles with TLS need it

        self._dir = directory or Path(tempfile.mkdtemp(prefix="minikafka-tls-"))
        self.ca_file = self._dir / "ca.pem"
        self._server_pem = self._dir / "server.pem"
        if self.ca_file.exists() and self._server_pem.exists():
            return  # made by an earlier start: clients keep trusting the same CA
        self._dir.mkdir(parents=True, exist_ok=True)
        self._ca = trustme.CA(organization_name="minikafka test CA")
        self._ca.cert_pem.write_to_path(str(self.ca_file))
        identities = sorted({host, "127.0.0.1", "localhost"})
        server = self._ca.issue_cert(*identities, common_name=host)
        server.private_key_and_cert_chain_pem.write_to_path(str(self._server_pem))

    def client_certificate(self, user: str) -> Path:
        """A PEM file with a key and a certificate for `user` (CN=user), signed by the test CA, for mutual TLS."""
        if self._dir is None or self._ca is None:
            raise ValueError("client certificates need a TLS listener whose CA this handle made")
        path = self._dir / f"client-{user}.pem"
        if not path.exists():
            cert = self._ca.issue_cert(f"{user}.client.test", common_name=user)
            cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        return path

    def broker_properties(self, listener: str, controller_listener: str | None = None) -> dict[str, str]:
        """Kafka's properties of a broker whose one listener, `listener`, has this security and is its inter-broker
        listener; with `controller_listener`, the broker also reaches its KRaft controller on that listener,
        secured the same way."""
        listeners = [listener, *([controller_listener] if controller_listener else [])]
        props = {"listener.security.protocol.map": ",".join(f"{name}:{self.protocol}" for name in listeners),
                 "inter.broker.listener.name": listener}
        for name in listeners:
            props.update(self.listener_properties(name))
        if self.sasl:
            props["sasl.mechanism.inter.broker.protocol"] = INTER_BROKER_MECHANISM
            if controller_listener:
                props["sasl.mechanism.controller.protocol"] = INTER_BROKER_MECHANISM
        return props

    def controller_properties(self, listener: str) -> dict[str, str]:
        """Kafka's properties of a KRaft controller whose listener, `listener`, has this security; it reaches the
        brokers' listener (named after the protocol, as Broker names it) as they reach each other, for the link
        faults a test cuts from its end."""
        broker_listener = self.protocol
        props = {"listener.security.protocol.map": f"{listener}:{self.protocol},{broker_listener}:{self.protocol}",
                 "inter.broker.listener.name": broker_listener,
                 **self.listener_properties(listener), **self.listener_properties(broker_listener)}
        if self.sasl:
            props["sasl.mechanism.inter.broker.protocol"] = INTER_BROKER_MECHANISM
        return props

    def listener_properties(self, listener: str) -> dict[str, str]:
        """Kafka's properties of one listener with this security, both as a node serves it and as the brokers
        connect to it: the PLAIN JAAS configuration holds the users and the admin's own login."""
        prefix = f"listener.name.{listener.lower()}."
        props: dict[str, str] = {}
        if self.tls:
            props.update({f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(self._server_pem),
                          f"{prefix}ssl.truststore.type": "PEM",
                          f"{prefix}ssl.truststore.location": str(self.ca_file),
                          f"{prefix}ssl.client.auth": self.ssl_client_auth})
        if self.sasl:
            users = " ".join(f"user_{name}={_jaas_quote(password)}" for name, password in self.users.items())
            login = f"username={_jaas_quote(ADMIN)} password={_jaas_quote(self.users[ADMIN])}"
            props.update({
                f"{prefix}sasl.enabled.mechanisms": ",".join(MECHANISMS),
                f"{prefix}plain.sasl.jaas.config": f"{PLAIN_LOGIN_MODULE} required {login} {users};",
                **{f"{prefix}{m.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required;"
                   for m in SCRAM_MECHANISMS},
                # Unsecured tokens (Kafka's default validator): a client names its principal in the token.
                f"{prefix}oauthbearer.sasl.jaas.config": f"{OAUTHBEARER_LOGIN_MODULE} required;",
            })
        return props

    def authorizer_properties(self) -> dict[str, str]:
        """With `acls`: Kafka's StandardAuthorizer, the admin (as whom the brokers also reach each other and the
        controller) its super user."""
        if self.acls is None:
            return {}
        return {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:{ADMIN}"}

    def add_initial_acls(self, bootstrap_servers: str) -> None:
        """Create the handle's `acls` once, when its broker (or cluster) first runs: they live in the metadata."""
        if self.acls is None or self._acls_added:
            return
        self.add_acls(bootstrap_servers, self.acls)
        self._acls_added = True

    def add_acls(self, bootstrap_servers: str, acls: Iterable[Acl]) -> None:
        create_acls(self.client_config(bootstrap_servers, ADMIN, "kafka-python", "PLAIN"), acls)

    def remove_acls(self, bootstrap_servers: str, acls: Iterable[Acl]) -> None:
        delete_acls(self.client_config(bootstrap_servers, ADMIN, "kafka-python", "PLAIN"), acls)

    def for_handle(self) -> ClientSecurity:
        """The admin's way in, for the handle's faults and state."""
        return ClientSecurity(self.protocol, str(self.ca_file) if self.ca_file else None,
                              ADMIN if self.sasl else None, self.users[ADMIN] if self.sasl else None)

    def client_config(self, bootstrap_servers: str, user: str | None, client: str, mechanism: str) -> Any:
        """The settings a client needs to connect as `user`, by the names of `client`'s library."""
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, not {client!r}")
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, not {mechanism!r}")
        user = user or ADMIN
        if self.sasl and mechanism != "OAUTHBEARER" and user not in self.users:
            raise ValueError(f"no user {user!r}: the broker has {', '.join(sorted(self.users))}")
        password = self.users.get(user)
        cert = self.client_certificate(user) if self.tls and self.ssl_client_auth != "none" else None
        ca = str(self.ca_file) if self.ca_file else None
        if client == "confluent":
            config = {"bootstrap.servers": bootstrap_servers, "security.protocol": self.protocol}
            if ca:
                config["ssl.ca.location"] = ca
            if cert:
                config.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(cert)})
            if self.sasl and mechanism == "OAUTHBEARER":  # librdkafka makes an unsecured token for the principal
                config.update({"sasl.mechanism": mechanism, "sasl.oauthbearer.config": f"principal={user}",
                               "enable.sasl.oauthbearer.unsecure.jwt": "true"})
            elif self.sasl:
                config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password or ""})
            return config
        if client == "java":
            lines = [f"bootstrap.servers={bootstrap_servers}", f"security.protocol={self.protocol}"]
            if ca:
                lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={ca}"]
            if cert:
                lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={cert}"]
            if self.sasl and mechanism == "OAUTHBEARER":
                lines += [f"sasl.mechanism={mechanism}", f"sasl.jaas.config={OAUTHBEARER_LOGIN_MODULE} required "
                                                         f"unsecuredLoginStringClaim_sub={_jaas_quote(user)};"]
            elif self.sasl:
                module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
                lines += [f"sasl.mechanism={mechanism}",
                          f"sasl.jaas.config={module} required username={_jaas_quote(user)} "
                          f"password={_jaas_quote(password or '')};"]
            return "\n".join(lines) + "\n"
        python: dict[str, Any] = {"bootstrap_servers": bootstrap_servers, "security_protocol": self.protocol}
        if self.sasl and mechanism == "OAUTHBEARER":
            python.update({"sasl_mechanism": mechanism, "sasl_oauth_token_provider": _token_provider(client, user)})
        elif self.sasl:
            python.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
        if self.tls:
            if client == "kafka-python":
                python["ssl_cafile"] = ca
                if cert:
                    python.update({"ssl_certfile": str(cert), "ssl_keyfile": str(cert)})
            else:
                import ssl

                context = ssl.create_default_context(cafile=ca)
                if cert:
                    context.load_cert_chain(str(cert))
                python["ssl_context"] = context
        return python

    def add_scram_credentials(self, bootstrap_servers: str) -> None:
        """Give every user SCRAM-SHA-256 and SCRAM-SHA-512 credentials (AlterUserScramCredentials, as the admin over
        PLAIN), once a broker runs, and only once: SCRAM's credentials are the cluster's metadata, not a listener's."""
        if not self.sasl or self._scram_added:
            return
        from kafka import KafkaAdminClient
        from kafka.admin import UserScramCredentialUpsertion

        admin = KafkaAdminClient(**self.client_config(bootstrap_servers, ADMIN, "kafka-python", "PLAIN"))
        try:
            for mechanism in SCRAM_MECHANISMS:  # a request may name a user once
                errors = admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion(user, mechanism, password) for user, password in self.users.items()])
                failed = {user: error for user, error in errors.items() if error}
                if failed:
                    raise RuntimeError(f"the broker refused SCRAM credentials: {failed}")
        finally:
            admin.close()
        self._scram_added = True

    def close(self) -> None:
        if self._dir is not None and not self._keep_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
