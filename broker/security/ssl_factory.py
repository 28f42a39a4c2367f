"""Python SSLContexts from Kafka's ssl.* properties, read as Kafka's DefaultSslEngineFactory reads them.

The properties are those of one listener (or of the broker's own connections), already resolved. Keystores and
truststores are JKS, PKCS12 or PEM (a file, or the PEM text inline in the properties), with Kafka's rules on which
properties go together. As in Java, a JKS or PKCS12 store is read whichever of the two formats the file is in.
Everything Kafka would refuse raises ConfigError naming the property.

Where Python's ssl cannot do what Java's JSSE does:
- a keystore holds exactly one private key (JSSE picks among several); a PKCS12 key is read with the store password;
- every certificate of a PKCS12 truststore is trusted (Java: those marked trusted and those of its key entries);
- TLS 1.3 cipher suites cannot be chosen one by one: named ones are accepted and OpenSSL's TLS 1.3 suites used;
- `ssl.enabled.protocols` becomes a range, from its lowest version to its highest;
- PEM keys may also be in OpenSSL's traditional unencrypted form, besides Kafka's PKCS#8.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import jks  # type: ignore[import-untyped]
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from minikafka.config import ConfigError

PEM_TYPE = "PEM"
DEFAULT_STORE_TYPE = "JKS"
DEFAULT_SSL_PROTOCOL = "TLSv1.3"
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
SSL_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
# Kafka's protocol names: the version and whether this Python's OpenSSL can speak it.
_TLS_VERSIONS = {
    "TLSv1": (ssl.TLSVersion.TLSv1, ssl.HAS_TLSv1),
    "TLSv1.1": (ssl.TLSVersion.TLSv1_1, ssl.HAS_TLSv1_1),
    "TLSv1.2": (ssl.TLSVersion.TLSv1_2, ssl.HAS_TLSv1_2),
    "TLSv1.3": (ssl.TLSVersion.TLSv1_3, ssl.HAS_TLSv1_3),
}
# The TLS 1.3 suites Java knows, and the renegotiation signal Java lists as a suite; OpenSSL handles both itself.
_TLS13_CIPHER_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})
_RENEGOTIATION_SIGNAL = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"
# The parts of an IANA (Java) TLS 1.2 suite name and their OpenSSL spelling.
_CIPHER_SUITE = re.compile(r"TLS_(?P<exchange>\w+?)_WITH_(?P<cipher>\w+)_(?P<mac>SHA|SHA256|SHA384)")
_OPENSSL_KEY_EXCHANGES = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-",
                          "DHE_DSS": "DHE-DSS-", "RSA": ""}
_OPENSSL_CIPHERS = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
                    "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305"}

# Java's X500Principal.getName(): the attribute types named by keyword in RFC 2253; others are printed as their OID.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET", "2.5.4.10": "O",
    "2.5.4.11": "OU", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# The DER string types Java prints as text (UTF8String, PrintableString, T61String, IA5String, GeneralString,
# BMPString), with the charset Java decodes them with; any other value is printed as `#` and its DER in hex.
_STRING_CHARSETS = {12: "utf-8", 19: "latin-1", 20: "latin-1", 22: "latin-1", 27: "latin-1", 30: "utf-16-be"}
_RFC2253_ESCAPED = ',=+<>#;"\\'


@dataclass(frozen=True)
class _KeyEntry:
    """A private key and its certificate chain, the certificate of the key first; `source` names their properties."""

    key: PrivateKeyTypes
    chain: list[x509.Certificate]
    source: str


class TlsConnection(Protocol):
    """A TLS connection that gives its peer's certificate: ssl.SSLObject, ssl.SSLSocket, trio.SSLStream."""

    def getpeercert(self, binary_form: Literal[True]) -> bytes | None: ...


def server_ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The SSLContext of a broker's TLS listener: it presents the keystore's certificate and, as `ssl.client.auth`
    says (none, requested, required), asks clients for theirs and checks it against the truststore (else the
    system's CAs, as Java falls back to its own)."""
    _ssl_protocol(props)
    client_auth = props.get("ssl.client.auth", "none")
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"Invalid value {client_auth!r} for configuration ssl.client.auth: "
                          f"expected one of {', '.join(CLIENT_AUTH)}")
    key_entry = _keystore(props)
    if key_entry is None:
        raise ConfigError("ssl.keystore.location is not set: a TLS listener needs a keystore for its certificate")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure_protocols(context, props, highest=ssl.TLSVersion.TLSv1_3)
    _load_key_entry(context, key_entry)
    context.verify_mode = CLIENT_AUTH[client_auth]
    _load_truststore(context, props, ssl.Purpose.CLIENT_AUTH)
    return context


def client_ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The SSLContext of the broker's own connections (to other brokers, to the controllers): it checks the server's
    certificate against the truststore (else the system's CAs) and, when `ssl.endpoint.identification.algorithm` is
    https (the default; an empty value turns it off), the server's host name; a keystore gives a client certificate.
    `ssl.protocol` TLSv1.2 keeps the client to TLS 1.2, as Java's TLSv1.2 SSLContext does."""
    protocol = _ssl_protocol(props)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
    if algorithm.lower() not in ("https", ""):
        raise ConfigError(f"Invalid value {algorithm!r} for configuration ssl.endpoint.identification.algorithm: "
                          "expected https, or empty for no host name verification")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = algorithm != ""
    highest = ssl.TLSVersion.TLSv1_2 if protocol == "TLSv1.2" else ssl.TLSVersion.TLSv1_3
    _configure_protocols(context, props, highest=highest)
    key_entry = _keystore(props)
    if key_entry is not None:
        _load_key_entry(context, key_entry)
    _load_truststore(context, props, ssl.Purpose.SERVER_AUTH)
    return context


def peer_principal_dn(connection: TlsConnection) -> str | None:
    """The distinguished name of the peer's certificate as Java's X500Principal.getName() prints it (RFC 2253, the
    most specific name first), which is what `ssl.principal.mapping.rules` match; None without a certificate.

    CN, C, L, ST, STREET, O, OU, DC and UID are printed by keyword; any other attribute (emailAddress, serialNumber,
    ...) as its OID with `#` and the value's DER in hex, e.g. 1.2.840.113549.1.9.1=#16..., as Java prints them.
    """
    der = connection.getpeercert(binary_form=True)
    if der is None:
        return None
    name = x509.load_der_x509_certificate(der).subject.public_bytes()
    [(_, rdns, _)] = _der_elements(name)
    return ",".join(reversed(["+".join(_rfc2253_attribute(attribute) for _, attribute, _ in _der_elements(rdn))
                              for _, rdn, _ in _der_elements(rdns)]))


def _ssl_protocol(props: Mapping[str, str]) -> str:
    """`ssl.protocol` names the SSLContext algorithm in Java; here it is checked (and caps a client at TLS 1.2)."""
    protocol = props.get("ssl.protocol", DEFAULT_SSL_PROTOCOL)
    if protocol not in SSL_PROTOCOLS:
        raise ConfigError(f"Invalid value {protocol!r} for configuration ssl.protocol: "
                          f"expected one of {', '.join(SSL_PROTOCOLS)}")
    return protocol


def _configure_protocols(context: ssl.SSLContext, props: Mapping[str, str], highest: ssl.TLSVersion) -> None:
    """The TLS versions of `ssl.enabled.protocols` (none above `highest`) and the cipher suites of
    `ssl.cipher.suites`.

    TLS 1.2 suites are given to OpenSSL by their OpenSSL names. Python cannot choose among the TLS 1.3 suites, so
    those named are accepted and OpenSSL's own TLS 1.3 suites are used. As in Java, a version none of whose suites
    are listed is not spoken: only TLS 1.3 suites mean TLS 1.3 only, no TLS 1.3 suite means TLS 1.2 at most.
    """
    # An empty list leaves JSSE's defaults, which are Kafka's.
    names = _list(props.get("ssl.enabled.protocols", DEFAULT_ENABLED_PROTOCOLS)) or _list(DEFAULT_ENABLED_PROTOCOLS)
    versions = []
    for name in names:
        version, supported = _TLS_VERSIONS.get(name, (None, False))
        if version is None or not supported:
            raise ConfigError(f"Invalid value {name!r} in configuration ssl.enabled.protocols: the protocols spoken "
                              f"are {', '.join(n for n, (_, s) in _TLS_VERSIONS.items() if s)}")
        versions.append(version)
    lowest, highest = min(versions), min(max(versions), highest)
    suites = _list(props.get("ssl.cipher.suites", ""))
    tls12_suites = {suite: _openssl_cipher_name(suite) for suite in suites
                    if suite not in _TLS13_CIPHER_SUITES and suite != _RENEGOTIATION_SIGNAL}
    if suites and not _TLS13_CIPHER_SUITES.intersection(suites):
        highest = min(highest, ssl.TLSVersion.TLSv1_2)
    if suites and not tls12_suites:
        lowest = max(lowest, ssl.TLSVersion.TLSv1_3)
    if lowest > highest:
        raise ConfigError("ssl.enabled.protocols, ssl.protocol and ssl.cipher.suites leave no TLS version to speak")
    context.minimum_version = lowest
    context.maximum_version = highest
    if tls12_suites:
        try:
            context.set_ciphers(":".join(tls12_suites.values()))
        except ssl.SSLError:
            raise ConfigError(f"No cipher suite of configuration ssl.cipher.suites is supported here: "
                              f"{', '.join(tls12_suites)}") from None
        known = {cipher["name"] for cipher in context.get_ciphers()}
        for suite, openssl_name in tls12_suites.items():
            if openssl_name not in known:
                raise ConfigError(f"Cipher suite {suite} of configuration ssl.cipher.suites is not supported here")


def _openssl_cipher_name(suite: str) -> str:
    """The OpenSSL name of a TLS 1.2 suite, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: ECDHE-RSA-AES128-GCM-SHA256."""
    match = _CIPHER_SUITE.fullmatch(suite)
    if (match is None or match["exchange"] not in _OPENSSL_KEY_EXCHANGES
            or match["cipher"] not in _OPENSSL_CIPHERS):
        raise ConfigError(f"Unknown cipher suite {suite!r} in configuration ssl.cipher.suites")
    mac = "" if match["cipher"] == "CHACHA20_POLY1305" else f"-{match['mac']}"
    return _OPENSSL_KEY_EXCHANGES[match["exchange"]] + _OPENSSL_CIPHERS[match["cipher"]] + mac


def _list(value: str) -> list[str]:
    """A Kafka list property: comma-separated, blanks around the items ignored."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _keystore(props: Mapping[str, str]) -> _KeyEntry | None:
    """The key and certificate chain the properties give, with Kafka's rules on which properties go together;
    None when they give none."""
    store_type = props.get("ssl.keystore.type", DEFAULT_STORE_TYPE)
    location = props.get("ssl.keystore.location")
    password = props.get("ssl.keystore.password")
    key_password = props.get("ssl.key.password")
    key = props.get("ssl.keystore.key")
    chain = props.get("ssl.keystore.certificate.chain")
    if key is not None:
        if store_type != PEM_TYPE:
            raise ConfigError(f"ssl.keystore.key can be specified only for PEM, but ssl.keystore.type is {store_type}")
        if chain is None:
            raise ConfigError("ssl.keystore.key is specified, but ssl.keystore.certificate.chain is not")
        if location is not None:
            raise ConfigError("Both ssl.keystore.location and ssl.keystore.key are specified")
        if password is not None:
            raise ConfigError("ssl.keystore.password cannot be specified with PEM format, only ssl.key.password")
        return _pem_key_entry(key, chain, key_password, "ssl.keystore.key", "ssl.keystore.certificate.chain")
    if chain is not None:
        raise ConfigError("ssl.keystore.certificate.chain is specified, but ssl.keystore.key is not")
    if location is None:
        if password is not None:
            raise ConfigError("ssl.keystore.password is specified, but ssl.keystore.location is not")
        return None
    if store_type == PEM_TYPE:
        if password is not None:
            raise ConfigError("ssl.keystore.password cannot be specified with PEM format, only ssl.key.password")
        text = _read(location, "ssl.keystore.location").decode("latin-1")
        return _pem_key_entry(text, text, key_password, "ssl.keystore.location", "ssl.keystore.location")
    if password is None:
        raise ConfigError("ssl.keystore.location is specified, but ssl.keystore.password is not")
    _check_store_type(store_type, "ssl.keystore.type")
    return _stored_key_entry(location, password, key_password)


def _stored_key_entry(location: str, password: str, key_password: str | None) -> _KeyEntry:
    """The one key entry of a JKS or PKCS12 keystore. A JKS key is read with `ssl.key.password`, else with the
    store password, as Kafka does; a PKCS12 key with the store password."""
    data = _read(location, "ssl.keystore.location")
    if not data.startswith(_JKS_MAGIC):
        key, certificate, others = _load_pkcs12(data, password, "keystore", location)
        if key is None or certificate is None:
            raise ConfigError(f"Keystore {location} (ssl.keystore.location) holds no private key")
        return _KeyEntry(key, [certificate, *others], "ssl.keystore.location")
    entries = list(_load_jks(data, password, "keystore", location).private_keys.values())
    if len(entries) != 1:
        raise ConfigError(f"Keystore {location} (ssl.keystore.location) holds {len(entries)} private keys: "
                          "one is expected")
    [entry] = entries
    password_config = "ssl.key.password" if key_password is not None else "ssl.keystore.password"
    try:
        entry.decrypt(key_password if key_password is not None else password)
    except jks.KeystoreException as e:
        raise ConfigError(f"The private key of keystore {location} cannot be recovered with {password_config}: "
                          f"{e}") from None
    return _KeyEntry(serialization.load_der_private_key(entry.pkey_pkcs8, None),
                     [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain], "ssl.keystore.location")


def _load_truststore(context: ssl.SSLContext, props: Mapping[str, str], purpose: ssl.Purpose) -> None:
    """The certificates the peer's is checked against: the truststore's, else (when the peer is checked) the
    system's CAs, as Java falls back to its own. As in Java, any trusted certificate ends a chain, not only a root."""
    certificates = _truststore(props)
    if certificates is not None:
        context.load_verify_locations(cadata="".join(
            c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certificates))
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    elif context.verify_mode != ssl.CERT_NONE:
        context.load_default_certs(purpose)


def _truststore(props: Mapping[str, str]) -> list[x509.Certificate] | None:
    """The trusted certificates the properties give, with Kafka's rules; None when they give none."""
    store_type = props.get("ssl.truststore.type", DEFAULT_STORE_TYPE)
    location = props.get("ssl.truststore.location")
    password = props.get("ssl.truststore.password")
    certificates = props.get("ssl.truststore.certificates")
    if certificates is not None:
        if store_type != PEM_TYPE:
            raise ConfigError("ssl.truststore.certificates can be specified only for PEM, "
                              f"but ssl.truststore.type is {store_type}")
        if location is not None:
            raise ConfigError("Both ssl.truststore.location and ssl.truststore.certificates are specified")
        if password is not None:
            raise ConfigError("ssl.truststore.password cannot be specified for PEM format")
        return _pem_certificates(certificates, "ssl.truststore.certificates")
    if location is None:
        if password is not None:
            raise ConfigError("ssl.truststore.password is specified, but ssl.truststore.location is not")
        return None
    if store_type == PEM_TYPE:
        if password is not None:
            raise ConfigError("ssl.truststore.password cannot be specified for PEM format")
        return _pem_certificates(_read(location, "ssl.truststore.location").decode("latin-1"),
                                 "ssl.truststore.location")
    _check_store_type(store_type, "ssl.truststore.type")
    data = _read(location, "ssl.truststore.location")
    if data.startswith(_JKS_MAGIC):
        # Java trusts a JKS store's trusted certificate entries and the certificates of its key entries.
        store = _load_jks(data, password, "truststore", location)
        trusted = [x509.load_der_x509_certificate(entry.cert) for entry in store.certs.values()]
        trusted += [x509.load_der_x509_certificate(entry.cert_chain[0][1]) for entry in store.private_keys.values()]
    else:
        _, certificate, others = _load_pkcs12(data, password, "truststore", location)
        trusted = [certificate, *others] if certificate is not None else others
    if not trusted:
        raise ConfigError(f"Truststore {location} (ssl.truststore.location) holds no certificate")
    return trusted


def _check_store_type(store_type: str, config: str) -> None:
    if store_type.upper() not in ("JKS", "PKCS12"):
        raise ConfigError(f"Invalid value {store_type!r} for configuration {config}: "
                          f"expected JKS, PKCS12 or {PEM_TYPE}")


def _read(location: str, config: str) -> bytes:
    try:
        with open(location, "rb") as file:
            return file.read()
    except OSError as e:
        raise ConfigError(f"Failed to read {location} ({config}): {e.strerror}") from None


def _load_jks(data: bytes, password: str | None, store: str, location: str) -> jks.KeyStore:
    """A JKS `store` (keystore, truststore); without a password its integrity is not checked, as in Java."""
    try:
        return jks.KeyStore.loads(data, password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise ConfigError(f"Failed to load SSL {store} {location} (ssl.{store}.location): "
                          f"ssl.{store}.password is incorrect") from None
    except jks.KeystoreException as e:
        raise ConfigError(f"Failed to load SSL {store} {location} (ssl.{store}.location) as JKS: {e}") from None


def _load_pkcs12(data: bytes, password: str | None, store: str, location: str) -> tuple[
        PrivateKeyTypes | None, x509.Certificate | None, list[x509.Certificate]]:
    """A PKCS12 `store` (keystore, truststore): its key, the certificate of the key, the other certificates."""
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password is not None else None)
    except ValueError:
        raise ConfigError(f"Failed to load SSL {store} {location} (ssl.{store}.location): not a JKS or PKCS12 "
                          f"store, or ssl.{store}.password is incorrect") from None


def _pem_key_entry(key_text: str, chain_text: str, key_password: str | None, key_config: str,
                   chain_config: str) -> _KeyEntry:
    """A key entry from PEM text: one private key (encrypted with `ssl.key.password` when that is set, as Kafka
    requires) and the certificate chain."""
    keys = _pem_entries(key_text, r"(?:[A-Z0-9]+ )*PRIVATE KEY", key_config)
    if len(keys) != 1:
        raise ConfigError(f"Expected one private key in {key_config}, but found {len(keys)}")
    try:
        key = serialization.load_der_private_key(keys[0], key_password.encode() if key_password is not None else None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise ConfigError(f"The private key of {key_config} cannot be read "
                          f"{'with' if key_password is not None else 'without'} ssl.key.password: {e}") from None
    source = key_config if key_config == chain_config else f"{key_config} and {chain_config}"
    return _KeyEntry(key, _pem_certificates(chain_text, chain_config), source)


def _pem_certificates(text: str, source: str) -> list[x509.Certificate]:
    certificates = _pem_entries(text, "CERTIFICATE", source)
    if not certificates:
        raise ConfigError(f"No certificate found in {source}: at least one PEM CERTIFICATE is expected")
    try:
        return [x509.load_der_x509_certificate(der) for der in certificates]
    except ValueError as e:
        raise ConfigError(f"Invalid certificate in {source}: {e}") from None


def _pem_entries(text: str, label: str, source: str) -> list[bytes]:
    """The DER of each PEM entry with this label. As Kafka's parser, the base64 may be broken by any white space
    (inline values in a properties file often lose their line breaks)."""
    entries = re.findall(rf"-+BEGIN ({label})-+([A-Za-z0-9+/=\s]*)-+END \1-+", text)
    try:
        return [base64.b64decode("".join(body.split()), validate=True) for _, body in entries]
    except binascii.Error as e:
        raise ConfigError(f"Invalid PEM base64 in {source}: {e}") from None


def _load_key_entry(context: ssl.SSLContext, entry: _KeyEntry) -> None:
    """Gives the context the key and chain. Python's ssl reads them only from a file: a private one (mode 0600),
    removed right after, holding the key encrypted with a one-time password so that no usable key touches the disk."""
    one_time_password = secrets.token_urlsafe(32)
    pem = entry.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(one_time_password.encode()))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in entry.chain)
    descriptor, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
        context.load_cert_chain(path, password=one_time_password)
    except ssl.SSLError as e:
        raise ConfigError(f"The private key and certificate chain of {entry.source} cannot be used: {e}") from None
    finally:
        os.unlink(path)


def _der_elements(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """The DER elements of `data` in order: (tag, contents, whole encoding). Enough of DER for a certificate's name."""
    elements = []
    position = 0
    while position < len(data):
        start = position
        tag, length = data[position], data[position + 1]
        position += 2
        if length & 0x80:
            size = length & 0x7F
            length = int.from_bytes(data[position:position + size], "big")
            position += size
        elements.append((tag, data[position:position + length], data[start:position + length]))
        position += length
    return elements


def _object_identifier(contents: bytes) -> str:
    arcs = []
    value = 0
    for byte in contents:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))


def _rfc2253_attribute(attribute: bytes) -> str:
    """One `type=value` of a name, as Java's AVA.toRFC2253String prints it."""
    [(_, oid, _), (tag, contents, encoding)] = _der_elements(attribute)
    dotted = _object_identifier(oid)
    keyword = _RFC2253_KEYWORDS.get(dotted)
    if keyword is None or tag not in _STRING_CHARSETS:
        return f"{keyword or dotted}=#{encoding.hex()}"
    value = "".join("\\" + c if c in _RFC2253_ESCAPED else "\\00" if c == "\0" else c
                    for c in contents.decode(_STRING_CHARSETS[tag], errors="replace"))
    # Leading and trailing blanks are escaped one by one.
    lead = len(value) - len(value.lstrip(" \r"))
    trail = len(value.rstrip(" \r"))
    return keyword + "=" + "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(value))
