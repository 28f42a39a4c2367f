"""The SASL mechanisms as the broker's authenticator drives them: one SaslServer per authentication, made for the
mechanism the client chose, and the credentials they check against.

A mechanism raises SaslAuthenticationError, whose message the client is told as it is, or SaslError, whose message
only the log sees (Kafka's SaslAuthenticationException and SaslException). PLAIN's users and passwords are a
listener's (its PLAIN JAAS options, `user_<name>="<password>"`); SCRAM's credentials are the cluster's, one set that
every listener reads and the metadata updates.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Protocol

from minikafka.broker.security.jaas import JaasLoginModule
from minikafka.broker.security.oauthbearer_sasl_server import (
    OAUTHBEARER_MECHANISM,
    OAuthBearerSaslServer,
    OAuthBearerValidator,
)
from minikafka.broker.security.plain_sasl_server import PLAIN_MECHANISM, PlainSaslServer
from minikafka.broker.security.scram import SaslAuthenticationError, SaslError, ScramCredential, ScramMechanism
from minikafka.broker.security.scram_sasl_server import ScramSaslServer

__all__ = ["CredentialStore", "SaslAuthenticationError", "SaslError", "SaslServer", "ScramCredentials",
           "create_sasl_server"]

_JAAS_USER_PREFIX = "user_"


class SaslServer(Protocol):
    """One authentication's server side (javax's SaslServer as Kafka uses it)."""

    mechanism: str
    # When the credential authenticated with expires (ms since the epoch), None if it does not: it bounds the session
    # (Kafka's CREDENTIAL_LIFETIME_MS negotiated property).
    credential_expiry_ms: int | None

    def evaluate_response(self, token: bytes) -> bytes:
        """The challenge to send back (may be b"") for the client's response."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user's name, once complete."""
        ...


class ScramCredentials:
    """The cluster's SCRAM credentials as the metadata has them now, by user and mechanism type id (the metadata
    image's `scram_credentials`): a credential added or removed there is used from the next authentication on."""

    def __init__(self, credentials: Callable[[], Mapping[tuple[str, int], ScramCredential]]) -> None:
        self._credentials = credentials

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        scram = ScramMechanism.for_mechanism_name(mechanism)
        return None if scram is None else self._credentials().get((user, scram.type_id))


class CredentialStore:
    """What a listener's mechanisms check credentials against."""

    def __init__(self, plain_users: Mapping[str, str], scram_credentials: ScramCredentials,
                 oauthbearer: OAuthBearerValidator | None = None) -> None:
        self._plain_users = plain_users
        self._scram_credentials = scram_credentials
        self.oauthbearer = oauthbearer  # what checks OAUTHBEARER's tokens, None if the listener does not serve it

    @staticmethod
    def plain_users_from(module: JaasLoginModule) -> dict[str, str]:
        """The PLAIN users and passwords of a login module's options: `user_alice="secret"` is alice's password
        (Kafka's PlainServerCallbackHandler)."""
        return {key.removeprefix(_JAAS_USER_PREFIX): value for key, value in module.options.items()
                if key.startswith(_JAAS_USER_PREFIX)}

    def plain_password(self, user: str) -> str | None:
        return self._plain_users.get(user)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._scram_credentials.get(mechanism, user)


def create_sasl_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    """A server for one authentication with `mechanism`; ValueError for a mechanism not served."""
    if mechanism == PLAIN_MECHANISM:
        return PlainSaslServer(credentials.plain_password)
    if mechanism == OAUTHBEARER_MECHANISM:
        if credentials.oauthbearer is None:
            raise ValueError(f"Requested mechanism '{mechanism}' has no token validator configured")
        return OAuthBearerSaslServer(credentials.oauthbearer)
    scram = ScramMechanism.for_mechanism_name(mechanism)
    if scram is None:
        served = ", ".join([PLAIN_MECHANISM, *(m.mechanism_name for m in ScramMechanism), OAUTHBEARER_MECHANISM])
        raise ValueError(f"Requested mechanism '{mechanism}' is not supported. Supported mechanisms are '{served}'.")
    return ScramSaslServer(scram, partial(credentials.scram_credential, mechanism))
