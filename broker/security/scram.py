"""SCRAM (RFC 5802, RFC 7677) as Kafka has it: its mechanisms, credentials, formatter and messages; and the SASL
errors every mechanism raises.

The errors live here, at the bottom of the mechanisms' imports, so that sasl_server can build every mechanism
without an import cycle; sasl_server is where the broker takes them from.

A Kafka credential keeps no password, only what the server needs (ScramCredential); its string form is the one Kafka
keeps in ZooKeeper (ScramCredentialUtils). Messages are read with Kafka's patterns (ScramMessages), so what Kafka
refuses is refused here: only the gs2 header `n` (no channel binding), ASCII names and nonces.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum


class SaslAuthenticationError(Exception):
    """Kafka's SaslAuthenticationException: its message goes to the client as it is."""


class SaslError(Exception):
    """Kafka's SaslException: the client is told only Kafka's generic failure, never this message."""


# The largest response a mechanism reads. Kafka's authenticator allows a whole request of 512 KiB
# (sasl.server.max.receive.size); the mechanisms themselves need a few hundred bytes.
MAX_RESPONSE_BYTES = 8192


class ScramMechanism(Enum):
    """Kafka's ScramMechanism: name, hash (hashlib's name) and Kafka's type id (the metadata's, the admin API's)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, type_id: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.type_id = type_id

    @property
    def min_iterations(self) -> int:
        return 4096

    @property
    def max_iterations(self) -> int:
        """The most a credential may be given through the admin API (AlterUserScramCredentials)."""
        return 16384

    @classmethod
    def for_mechanism_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a password (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


# Kafka's ScramFormatter.

def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC. Kafka normalizes a password to its
    UTF-8 bytes only (no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Client Key", mechanism.hash_name)


def stored_key(mechanism: ScramMechanism, key: bytes) -> bytes:
    """H(ClientKey): what the server keeps to check proofs with."""
    return hashlib.new(mechanism.hash_name, key).digest()


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Server Key", mechanism.hash_name)


def auth_message(client_first_bare: str, server_first: str, client_final_without_proof: str) -> bytes:
    """AuthMessage of RFC 5802, the text both proofs sign."""
    return f"{client_first_bare},{server_first},{client_final_without_proof}".encode()


def client_signature(mechanism: ScramMechanism, stored: bytes, message: bytes) -> bytes:
    return hmac.digest(stored, message, mechanism.hash_name)


def client_proof(mechanism: ScramMechanism, salted: bytes, message: bytes) -> bytes:
    """ClientKey XOR ClientSignature: what a client sends to prove it knows the password."""
    key = client_key(mechanism, salted)
    return xor(key, client_signature(mechanism, stored_key(mechanism, key), message))


def server_signature(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    """What the server sends to prove it holds the credential."""
    return hmac.digest(key, message, mechanism.hash_name)


def xor(first: bytes, second: bytes) -> bytes:
    """ValueError unless both are of the same length."""
    return bytes(a ^ b for a, b in zip(first, second, strict=True))


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36, its server nonce and (as ASCII) its
    salt."""
    return base36(secrets.randbits(130))


def base36(number: int) -> str:
    """A non-negative number in base 36, lower case (Java's BigInteger.toString(36))."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


def generate_credential(mechanism: ScramMechanism, password: str, iterations: int = 4096,
                        salt: bytes | None = None) -> ScramCredential:
    """A credential for `password`; the salt, unless given, random as Kafka makes it."""
    if salt is None:
        salt = secure_random_string().encode()
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(salt, stored_key(mechanism, client_key(mechanism, salted)),
                           server_key(mechanism, salted), iterations)


def sasl_name(user: str) -> str:
    """The SASLname a SCRAM message names `user` by: `=` as `=3D`, `,` as `=2C` (Kafka's ScramFormatter.saslName)."""
    return user.replace("=", "=3D").replace(",", "=2C")


def username(name: str) -> str:
    """The user name a SCRAM message's SASLname stands for (`=2C` is `,`, `=3D` is `=`); ValueError for a `=`
    not part of either."""
    decoded = name.replace("=2C", ",")
    if "=" in decoded.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return decoded.replace("=3D", "=")


# Kafka's ScramCredentialUtils: a credential as text.

def credential_to_string(credential: ScramCredential) -> str:
    return (f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
            f"server_key={_b64(credential.server_key)},iterations={credential.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """The credential of Kafka's text form; ValueError if it is not one (the text itself is left out: it holds
    keys)."""
    props = {}
    for token in text.rstrip(",").split(","):  # Java's split drops trailing empty tokens
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("Credentials not valid: expected salt, stored_key, server_key and iterations")
        props[key] = value
    if props.keys() != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError("Credentials not valid: expected salt, stored_key, server_key and iterations")
    try:
        return ScramCredential(_b64decode(props["salt"]), _b64decode(props["stored_key"]),
                               _b64decode(props["server_key"]), int(props["iterations"]))
    except ValueError:  # binascii.Error is one
        raise ValueError("Credentials not valid: a key is not base64 or the iterations not a number") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


# Kafka's ScramMessages: the patterns of the messages a server reads, as ASCII classes (Java's `[a-b&&[^c]]` spelled
# out), and the messages it writes.
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # [\x01-\x7F] but `,` and `=`
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F] but `,`
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] but `,`
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"{_RESERVED}(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE_SAFE}+))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}")


@dataclass(frozen=True)
class ClientFirstMessage:
    """gs2-header [reserved-mext ","] username "," nonce ["," extensions]; only the gs2 header `n` (the client
    neither uses nor supports channel binding), as Kafka."""

    gs2_header: str  # as sent: `n,,` or `n,a=<authzid>,`
    authorization_id: str  # as sent (a SASLname), "" when the header names none
    sasl_name: str
    nonce: str
    extensions: Mapping[str, str]
    # client-first-message-bare as sent, part of the auth message; as Kafka, without a reserved `m=` (which RFC 5802
    # has fail: the client's proof then cannot match)
    bare: str

    @classmethod
    def parse(cls, response: bytes) -> ClientFirstMessage:
        message = response.decode(errors="replace")
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM client first message format: {message}")
        return cls(match["gs2"], match["authzid"] or "", match["saslname"], match["nonce"],
                   _extensions(match["extensions"]), match["bare"])

    @property
    def token_authenticated(self) -> bool:
        """Whether the client authenticates with a delegation token (the extension `tokenauth=true`)."""
        return self.extensions.get("tokenauth", "").lower() == "true"


def _extensions(text: str) -> dict[str, str]:
    """`,key=value,...` as a map (Kafka's Utils.parseMap: a key repeated keeps its last value)."""
    pairs = (extension.partition("=") for extension in text[1:].split(",")) if text else ()
    return {key: value for key, _, value in pairs}


@dataclass(frozen=True)
class ServerFirstMessage:
    nonce: str  # the client's nonce and the server's
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, challenge: bytes) -> ServerFirstMessage:
        """The server's first message as a client reads it; SaslError if it is not one."""
        message = challenge.decode(errors="replace")
        match = _SERVER_FIRST.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM server first message format: {message}")
        iterations = int(match["iterations"])
        if iterations <= 0:
            raise SaslError(f"Invalid SCRAM server first message format: invalid iterations {iterations}")
        return cls(match["nonce"], _b64decode(match["salt"]), iterations)

    def to_message(self) -> str:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"


@dataclass(frozen=True)
class ClientFinalMessage:
    """channel-binding "," nonce ["," extensions] "," proof."""

    channel_binding: bytes
    nonce: str
    proof: bytes = field(repr=False)
    without_proof: str  # client-final-message-without-proof as sent: part of the auth message

    @classmethod
    def parse(cls, response: bytes) -> ClientFinalMessage:
        message = response.decode(errors="replace")
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM client final message format: {message}")
        return cls(_b64decode(match["channel"]), match["nonce"], _b64decode(match["proof"]), match["without_proof"])


@dataclass(frozen=True)
class ServerFinalMessage:
    """`v=` the server's signature, or `e=` an error."""

    server_signature: bytes
    error: str | None = None

    @classmethod
    def parse(cls, challenge: bytes) -> ServerFinalMessage:
        """The server's final message as a client reads it; SaslError if it is not one."""
        message = challenge.decode(errors="replace")
        match = _SERVER_FINAL.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM server final message format: {message}")
        if match["error"] is not None:
            return cls(b"", match["error"])
        return cls(_b64decode(match["signature"]))

    def to_message(self) -> str:
        return f"e={self.error}" if self.error is not None else f"v={_b64(self.server_signature)}"
