"""The server side of SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's ScramSaslServer): two client messages, two
answers.

The client's first message names the user and the client's nonce; the server answers with the nonce completed by
its own, the credential's salt and iterations. The client's final message proves it knows the password; the server
checks the proof against the stored key and answers with its own signature.

Unlike Kafka, which fails at once a user it has no credential for, an unknown user is answered as a known one, with
a stand-in salt that is the same at every attempt (as a real one is), and fails at the proof exactly as a wrong
password does: no answer tells who exists. Delegation tokens (the extension `tokenauth=true`) are not served.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from enum import Enum, auto

from minikafka.broker.security.scram import (
    MAX_RESPONSE_BYTES,
    ClientFinalMessage,
    ClientFirstMessage,
    SaslAuthenticationError,
    SaslError,
    ScramCredential,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    base36,
    client_signature,
    secure_random_string,
    server_signature,
    stored_key,
    username,
    xor,
)

# This process's secret, from which an unknown user's stand-in salt is derived.
_UNKNOWN_USER_SALT_KEY = secrets.token_bytes(32)


class ScramState(Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = auto()
    RECEIVE_CLIENT_FINAL_MESSAGE = auto()
    COMPLETE = auto()
    FAILED = auto()


class ScramSaslServer:
    """One SCRAM authentication. `credential_of` gives a user's credential for this mechanism, None if it has
    none."""

    credential_expiry_ms: int | None = None  # a SCRAM credential does not expire (a delegation token's would)

    def __init__(self, mechanism: ScramMechanism, credential_of: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credential_of = credential_of
        self.state = ScramState.RECEIVE_CLIENT_FIRST_MESSAGE
        self._authorization_id = ""
        self._known_user = False
        self._credential: ScramCredential | None = None
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None

    @property
    def complete(self) -> bool:
        return self.state is ScramState.COMPLETE

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, token: bytes) -> bytes:
        """The answer to the client's message; SaslAuthenticationError or SaslError, and this authentication
        failed, for a response that does not authenticate."""
        try:
            if len(token) > MAX_RESPONSE_BYTES:
                raise SaslError(f"SCRAM response of {len(token)} bytes: the most read is {MAX_RESPONSE_BYTES}")
            if self.state is ScramState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._receive_client_first(token)
            if self.state is ScramState.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._receive_client_final(token)
            raise SaslError(f"Unexpected challenge in Sasl server state {self.state.name}")
        except (SaslAuthenticationError, SaslError):
            self._clear_credentials()
            self.state = ScramState.FAILED
            raise

    def _receive_client_first(self, token: bytes) -> bytes:
        client_first = ClientFirstMessage.parse(token)
        user = username(client_first.sasl_name)  # never a ValueError: the message's pattern admits valid names only
        if client_first.token_authenticated:
            raise SaslAuthenticationError("Authentication failed: delegation tokens are not supported")
        credential = self._credential_of(user)
        self._known_user = credential is not None
        if credential is None:
            credential = self._unknown_user_credential(user)
        if client_first.authorization_id and client_first.authorization_id != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self._scram.min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{self._scram.min_iterations} for {self._scram.name}")
        self._authorization_id = user
        self._credential = credential
        self._client_first = client_first
        self._server_first = ServerFirstMessage(client_first.nonce + secure_random_string(), credential.salt,
                                                credential.iterations)
        self.state = ScramState.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._server_first.to_message().encode()

    def _receive_client_final(self, token: bytes) -> bytes:
        credential, client_first, server_first = self._credential, self._client_first, self._server_first
        assert credential is not None and client_first is not None and server_first is not None
        client_final = ClientFinalMessage.parse(token)
        if not client_final.nonce.endswith(server_first.nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        if client_final.channel_binding != client_first.gs2_header.encode():
            # RFC 5802: without channel binding, `c` is the gs2 header the client sent (`biws` for `n,,`).
            raise SaslError("Invalid channel binding in the final client message.")
        message = auth_message(client_first.bare, server_first.to_message(), client_final.without_proof)
        signature = client_signature(self._scram, credential.stored_key, message)
        if len(client_final.proof) != len(signature):
            raise SaslError("Invalid client credentials")
        # H(ClientSignature XOR ClientProof) is the stored key when the client knows the password.
        computed = stored_key(self._scram, xor(signature, client_final.proof))
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known_user:
            raise SaslError("Invalid client credentials")
        answer = ServerFinalMessage(server_signature(self._scram, credential.server_key, message))
        self._clear_credentials()
        self.state = ScramState.COMPLETE
        return answer.to_message().encode()

    def _unknown_user_credential(self, user: str) -> ScramCredential:
        """A stand-in credential: the salt the same at every attempt, as Kafka makes salts (130 bits in base 36);
        the keys random, no proof is ever accepted."""
        digest = hmac.digest(_UNKNOWN_USER_SALT_KEY, f"{self.mechanism}\0{user}".encode(), "sha256")
        salt = base36(int.from_bytes(digest) >> (len(digest) * 8 - 130)).encode()
        size = hashlib.new(self._scram.hash_name).digest_size
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size), self._scram.min_iterations)

    def _clear_credentials(self) -> None:
        self._credential = None
        self._client_first = None
        self._server_first = None
