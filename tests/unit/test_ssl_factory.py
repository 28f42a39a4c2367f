"""SSLContexts from Kafka's ssl.* properties: real TLS handshakes in memory between a broker listener's context and
a client's, for every keystore and truststore type, client authentication, host name verification, protocols and
cipher suites; and the ConfigErrors, each naming its property, for what Kafka would refuse."""
from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path

import jks
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from minikafka.broker.security.ssl_factory import client_ssl_context, peer_principal_dn, server_ssl_context
from minikafka.config import ConfigError

STORE_PASSWORD = "store-secret"
KEY_PASSWORD = "key-secret"
BROKER_DN = "CN=broker,OU=eng,O=Example"
CLIENT_DN = "CN=alice,OU=eng,O=Example"


@dataclass(frozen=True)
class Stores:
    """The keystores of one certificate, by type: ssl.* properties giving it."""

    pem_file: dict[str, str]
    pem_inline: dict[str, str]
    pem_encrypted: dict[str, str]
    pkcs12: dict[str, str]
    jks: dict[str, str]
    jks_key_password: dict[str, str]

    def by_type(self, name: str) -> dict[str, str]:
        return dict(getattr(self, name))


KEYSTORE_TYPES = ["pem_file", "pem_inline", "pem_encrypted", "pkcs12", "jks", "jks_key_password"]


def write_keystores(directory: Path, cert: trustme.LeafCert) -> Stores:
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    chain = [x509.load_pem_x509_certificate(pem.bytes()) for pem in cert.cert_chain_pems]
    chain_pem = b"".join(pem.bytes() for pem in cert.cert_chain_pems).decode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    encrypted_key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.BestAvailableEncryption(KEY_PASSWORD.encode())).decode()
    (directory / "keystore.pem").write_text(key_pem + chain_pem)
    (directory / "encrypted.pem").write_text(encrypted_key_pem + chain_pem)
    (directory / "keystore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"kafka", key, chain[0], chain[1:], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    key_der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    chain_der = [c.public_bytes(serialization.Encoding.DER) for c in chain]
    jks.KeyStore.new("jks", [jks.PrivateKeyEntry.new("kafka", chain_der, key_der)]).save(
        str(directory / "keystore.jks"), STORE_PASSWORD)
    entry = jks.PrivateKeyEntry.new("kafka", chain_der, key_der)
    entry.encrypt(KEY_PASSWORD)
    jks.KeyStore.new("jks", [entry]).save(str(directory / "key-password.jks"), STORE_PASSWORD)
    return Stores(
        pem_file={"ssl.keystore.type": "PEM", "ssl.keystore.location": str(directory / "keystore.pem")},
        pem_inline={"ssl.keystore.type": "PEM", "ssl.keystore.key": key_pem,
                    "ssl.keystore.certificate.chain": chain_pem},
        pem_encrypted={"ssl.keystore.type": "PEM", "ssl.keystore.location": str(directory / "encrypted.pem"),
                       "ssl.key.password": KEY_PASSWORD},
        pkcs12={"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(directory / "keystore.p12"),
                "ssl.keystore.password": STORE_PASSWORD},
        jks={"ssl.keystore.location": str(directory / "keystore.jks"), "ssl.keystore.password": STORE_PASSWORD},
        jks_key_password={"ssl.keystore.location": str(directory / "key-password.jks"),
                          "ssl.keystore.password": STORE_PASSWORD, "ssl.key.password": KEY_PASSWORD},
    )


def write_truststores(directory: Path, ca: trustme.CA) -> dict[str, dict[str, str]]:
    """ssl.* properties trusting `ca`, by truststore type."""
    ca_pem = ca.cert_pem.bytes()
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    (directory / "truststore.pem").write_bytes(ca_pem)
    (directory / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    (directory / "unprotected.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], serialization.NoEncryption()))
    ca_der = ca_cert.public_bytes(serialization.Encoding.DER)
    jks.KeyStore.new("jks", [jks.TrustedCertEntry.new("ca", ca_der)]).save(
        str(directory / "truststore.jks"), STORE_PASSWORD)
    return {
        "pem_file": {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(directory / "truststore.pem")},
        "pem_inline": {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca_pem.decode()},
        "pkcs12": {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(directory / "truststore.p12"),
                   "ssl.truststore.password": STORE_PASSWORD},
        "pkcs12_without_password": {"ssl.truststore.type": "PKCS12",
                                    "ssl.truststore.location": str(directory / "unprotected.p12")},
        "jks": {"ssl.truststore.location": str(directory / "truststore.jks"),
                "ssl.truststore.password": STORE_PASSWORD},
        # Without a password a JKS store is read but its integrity not checked, as in Java.
        "jks_without_password": {"ssl.truststore.location": str(directory / "truststore.jks")},
    }


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def broker_stores(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Stores:
    cert = ca.issue_cert("localhost", common_name="broker", organization_name="Example", organization_unit_name="eng")
    return write_keystores(tmp_path_factory.mktemp("broker"), cert)


@pytest.fixture(scope="module")
def client_stores(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Stores:
    cert = ca.issue_cert("alice.example", common_name="alice", organization_name="Example",
                         organization_unit_name="eng")
    return write_keystores(tmp_path_factory.mktemp("client"), cert)


@pytest.fixture(scope="module")
def truststores(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    return write_truststores(tmp_path_factory.mktemp("trust"), ca)


@pytest.fixture(scope="module")
def stranger_truststore(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A truststore of a CA that signed nothing here."""
    return write_truststores(tmp_path_factory.mktemp("stranger"), trustme.CA())["pem_inline"]


@pytest.fixture(scope="module")
def broker(broker_stores: Stores) -> dict[str, str]:
    return broker_stores.pem_inline


@pytest.fixture(scope="module")
def trusting(truststores: dict[str, dict[str, str]]) -> dict[str, str]:
    return truststores["pem_inline"]


def handshake(server_context: ssl.SSLContext, client_context: ssl.SSLContext,
              server_hostname: str = "localhost") -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A TLS handshake in memory, then a message each way; raises the ssl.SSLError of the side that gives up."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    client = client_context.wrap_bio(client_in, client_out, server_hostname=server_hostname)

    def pump() -> None:
        server_in.write(client_out.read())
        client_in.write(server_out.read())

    pending = [client, server]
    for _ in range(10):
        for side in list(pending):
            try:
                side.do_handshake()
                pending.remove(side)
            except ssl.SSLWantReadError:
                pass
        pump()
    assert not pending
    client.write(b"request")
    pump()
    assert server.read() == b"request"
    server.write(b"response")
    pump()
    assert client.read() == b"response"
    return server, client


@pytest.mark.parametrize("keystore", KEYSTORE_TYPES)
def test_a_listener_presents_the_certificate_of_each_keystore_type(broker_stores, trusting, keystore):
    server, client = handshake(server_ssl_context(broker_stores.by_type(keystore)), client_ssl_context(trusting))
    assert client.version() == "TLSv1.3"
    assert peer_principal_dn(client) == BROKER_DN
    assert peer_principal_dn(server) is None


@pytest.mark.parametrize("truststore", ["pem_file", "pem_inline", "pkcs12", "pkcs12_without_password", "jks",
                                        "jks_without_password"])
def test_a_client_trusts_the_certificates_of_each_truststore_type(broker, truststores, truststore):
    _, client = handshake(server_ssl_context(broker), client_ssl_context(truststores[truststore]))
    assert peer_principal_dn(client) == BROKER_DN


def test_jks_and_pkcs12_types_read_either_format_as_java_does(broker_stores, trusting):
    jks_as_pkcs12 = {**broker_stores.jks, "ssl.keystore.type": "PKCS12"}
    pkcs12_as_jks = {**broker_stores.pkcs12, "ssl.keystore.type": "jks"}
    for keystore in (jks_as_pkcs12, pkcs12_as_jks):
        handshake(server_ssl_context(keystore), client_ssl_context(trusting))


def test_a_jks_keystore_is_a_truststore_of_its_own_certificate(broker_stores):
    """Java trusts the certificates of a truststore's key entries too."""
    truststore = {"ssl.truststore.location": broker_stores.jks["ssl.keystore.location"],
                  "ssl.truststore.password": STORE_PASSWORD}
    handshake(server_ssl_context(broker_stores.jks), client_ssl_context(truststore))


@pytest.mark.parametrize("keystore", KEYSTORE_TYPES)
def test_client_auth_required_gives_the_client_certificate_dn(broker, trusting, client_stores, keystore):
    server_context = server_ssl_context({**broker, **trusting, "ssl.client.auth": "required"})
    server, _ = handshake(server_context, client_ssl_context({**trusting, **client_stores.by_type(keystore)}))
    assert peer_principal_dn(server) == CLIENT_DN


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_client_auth_required_refuses_a_client_without_certificate(broker, trusting, protocol):
    server_context = server_ssl_context({**broker, **trusting, "ssl.client.auth": "required",
                                         "ssl.enabled.protocols": protocol})
    with pytest.raises(ssl.SSLError):
        handshake(server_context, client_ssl_context(trusting))


def test_client_auth_required_refuses_a_certificate_the_truststore_does_not_trust(
        broker, trusting, client_stores, stranger_truststore):
    server_context = server_ssl_context({**broker, **stranger_truststore, "ssl.client.auth": "required"})
    with pytest.raises(ssl.SSLError):
        handshake(server_context, client_ssl_context({**trusting, **client_stores.pem_file}))


def test_client_auth_requested_takes_a_certificate_when_given(broker, trusting, client_stores):
    server_context = server_ssl_context({**broker, **trusting, "ssl.client.auth": "requested"})
    assert server_context.verify_mode == ssl.CERT_OPTIONAL
    server, _ = handshake(server_context, client_ssl_context(trusting))
    assert peer_principal_dn(server) is None
    server, _ = handshake(server_context, client_ssl_context({**trusting, **client_stores.jks}))
    assert peer_principal_dn(server) == CLIENT_DN


def test_client_auth_none_asks_no_certificate(broker, trusting, client_stores):
    server_context = server_ssl_context({**broker, **trusting})
    assert server_context.verify_mode == ssl.CERT_NONE
    server, _ = handshake(server_context, client_ssl_context({**trusting, **client_stores.jks}))
    assert peer_principal_dn(server) is None


def test_host_name_verification_is_on_by_default(broker, trusting):
    assert client_ssl_context(trusting).check_hostname
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(server_ssl_context(broker), client_ssl_context(trusting), server_hostname="other.example")


def test_an_empty_endpoint_identification_algorithm_turns_host_name_verification_off(
        broker, trusting, stranger_truststore):
    no_identification = {"ssl.endpoint.identification.algorithm": ""}
    context = client_ssl_context({**trusting, **no_identification})
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    handshake(server_ssl_context(broker), context, server_hostname="other.example")
    # The certificate chain is still checked.
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(server_ssl_context(broker), client_ssl_context({**stranger_truststore, **no_identification}))


def test_without_a_truststore_a_client_trusts_the_system_cas_only(broker):
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_ssl_context(broker), client_ssl_context({}))


@pytest.mark.parametrize(("server_protocols", "client_protocols", "negotiated"), [
    ("TLSv1.2,TLSv1.3", "TLSv1.2,TLSv1.3", "TLSv1.3"),
    ("TLSv1.2", "TLSv1.2,TLSv1.3", "TLSv1.2"),
    ("TLSv1.2,TLSv1.3", "TLSv1.2", "TLSv1.2"),
    ("TLSv1.3", "TLSv1.3", "TLSv1.3"),
    ("TLSv1.3", "TLSv1.2", None),
    ("TLSv1.2", "TLSv1.3", None),
])
def test_enabled_protocols(broker, trusting, server_protocols, client_protocols, negotiated):
    server_context = server_ssl_context({**broker, "ssl.enabled.protocols": server_protocols})
    client_context = client_ssl_context({**trusting, "ssl.enabled.protocols": client_protocols})
    if negotiated is None:
        with pytest.raises(ssl.SSLError):
            handshake(server_context, client_context)
    else:
        _, client = handshake(server_context, client_context)
        assert client.version() == negotiated


def test_ssl_protocol_tls12_keeps_a_client_to_tls12(broker, trusting):
    """Kafka: with ssl.protocol TLSv1.2 a client does not use TLS 1.3 even when ssl.enabled.protocols has it."""
    _, client = handshake(server_ssl_context(broker), client_ssl_context({**trusting, "ssl.protocol": "TLSv1.2"}))
    assert client.version() == "TLSv1.2"
    for protocol in ("TLS", "TLSv1.3"):
        _, client = handshake(server_ssl_context({**broker, "ssl.protocol": "TLSv1.2"}),
                              client_ssl_context({**trusting, "ssl.protocol": protocol}))
        assert client.version() == "TLSv1.3"


def test_a_tls12_cipher_suite_is_negotiated_by_its_openssl_name(broker, trusting):
    server_context = server_ssl_context({**broker, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
    _, client = handshake(server_context, client_ssl_context(trusting))
    # No TLS 1.3 suite listed: as in Java, TLS 1.3 is not spoken.
    assert client.cipher()[:2] == ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLSv1.2")


def test_tls13_cipher_suites_alone_mean_tls13(broker, trusting):
    server_context = server_ssl_context({**broker, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert server_context.minimum_version == ssl.TLSVersion.TLSv1_3
    _, client = handshake(server_context, client_ssl_context(trusting))
    assert client.version() == "TLSv1.3"
    with pytest.raises(ConfigError, match="ssl.cipher.suites"):
        server_ssl_context({**broker, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
                            "ssl.enabled.protocols": "TLSv1.2"})


@pytest.mark.parametrize(("suite", "openssl_name"), [
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"),
    ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "DHE-RSA-AES128-GCM-SHA256"),
    ("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "DHE-RSA-CHACHA20-POLY1305"),
    ("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", "DHE-RSA-AES256-SHA256"),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"),
])
def test_cipher_suites_translate_to_openssl_names(broker, suite, openssl_name):
    context = server_ssl_context({**broker, "ssl.cipher.suites": f"{suite}, TLS_AES_256_GCM_SHA384"})
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"]
    assert tls12 == [openssl_name]
    assert context.maximum_version == ssl.TLSVersion.TLSv1_3


def test_key_material_never_stays_on_disk(broker_stores, trusting, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    for keystore in KEYSTORE_TYPES:
        server_ssl_context(broker_stores.by_type(keystore))
        client_ssl_context({**trusting, **broker_stores.by_type(keystore)})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("change", "config"), [
    ({"ssl.keystore.location": None}, "ssl.keystore.location"),
    ({"ssl.keystore.password": "wrong"}, "ssl.keystore.password"),
    ({"ssl.keystore.password": None}, "ssl.keystore.password"),
    ({"ssl.keystore.location": "/nonexistent/keystore.jks"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "JCEKS"}, "ssl.keystore.type"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"}, "ssl.keystore.type"),
    ({"ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"},
     "ssl.keystore.key"),
    ({"ssl.client.auth": "REQUIRED"}, "ssl.client.auth"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ({"ssl.protocol": "TLSv1.1"}, "ssl.protocol"),
    ({"ssl.enabled.protocols": "TLSv1.2,TLSv1.4"}, "ssl.enabled.protocols"),
    ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
    ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_MADE_UP_WITH_NOTHING_SHA"},
     "ssl.cipher.suites"),
    ({"ssl.cipher.suites": "SSL_RSA_WITH_RC4_128_MD5"}, "ssl.cipher.suites"),
    ({"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}, "ssl.cipher.suites"),
    ({"ssl.truststore.type": "BKS", "ssl.truststore.location": "/some/truststore"}, "ssl.truststore.type"),
    ({"ssl.truststore.password": "alone"}, "ssl.truststore.location"),
])
def test_a_jks_listener_refuses_what_kafka_refuses(broker_stores, change, config):
    props = {**broker_stores.jks, **change}
    with pytest.raises(ConfigError, match=config.replace(".", r"\.")):
        server_ssl_context({k: v for k, v in props.items() if v is not None})


@pytest.mark.parametrize(("keystore", "change", "config"), [
    ("pem_file", {"ssl.keystore.password": STORE_PASSWORD}, "ssl.keystore.password"),
    ("pem_file", {"ssl.keystore.key": "key"}, "ssl.keystore.certificate.chain"),
    ("pem_inline", {"ssl.keystore.location": "/some/keystore.pem"}, "ssl.keystore.location"),
    ("pem_inline", {"ssl.keystore.certificate.chain": None}, "ssl.keystore.certificate.chain"),
    ("pem_inline", {"ssl.keystore.certificate.chain": "no certificate here"}, "ssl.keystore.certificate.chain"),
    ("pem_inline", {"ssl.key.password": KEY_PASSWORD}, "ssl.key.password"),
    ("pem_encrypted", {"ssl.key.password": "wrong"}, "ssl.key.password"),
    ("pem_encrypted", {"ssl.key.password": None}, "ssl.key.password"),
    ("pkcs12", {"ssl.keystore.password": "wrong"}, "ssl.keystore.password"),
    ("pkcs12", {"ssl.keystore.type": "PEM"}, "ssl.keystore.password"),
    ("jks_key_password", {"ssl.key.password": None}, "ssl.keystore.password"),
    ("jks_key_password", {"ssl.key.password": "wrong"}, "ssl.key.password"),
])
def test_keystores_refuse_what_kafka_refuses(broker_stores, keystore, change, config):
    props = {**broker_stores.by_type(keystore), **change}
    with pytest.raises(ConfigError, match=config.replace(".", r"\.")):
        server_ssl_context({k: v for k, v in props.items() if v is not None})


def test_a_key_that_is_not_the_certificates_is_refused(broker_stores, client_stores):
    props = {**broker_stores.pem_inline, "ssl.keystore.key": client_stores.pem_inline["ssl.keystore.key"]}
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.key"):
        server_ssl_context(props)


def test_a_pem_file_with_two_keys_is_refused(broker_stores, tmp_path):
    text = Path(broker_stores.pem_file["ssl.keystore.location"]).read_text()
    (tmp_path / "two-keys.pem").write_text(text + text)
    with pytest.raises(ConfigError, match="Expected one private key"):
        server_ssl_context({**broker_stores.pem_file, "ssl.keystore.location": str(tmp_path / "two-keys.pem")})


def test_pem_whose_line_breaks_were_lost_in_a_properties_file_still_reads(broker_stores, trusting):
    props = {name: " ".join(value.split()) if name.startswith("ssl.keystore.") else value
             for name, value in broker_stores.pem_inline.items()}
    handshake(server_ssl_context(props), client_ssl_context(trusting))


@pytest.mark.parametrize(("truststore", "change", "config"), [
    ("pem_inline", {"ssl.truststore.type": "JKS"}, "ssl.truststore.type"),
    ("pem_inline", {"ssl.truststore.location": "/some/truststore.pem"}, "ssl.truststore.location"),
    ("pem_inline", {"ssl.truststore.password": STORE_PASSWORD}, "ssl.truststore.password"),
    ("pem_inline", {"ssl.truststore.certificates": "none here"}, "ssl.truststore.certificates"),
    ("pem_file", {"ssl.truststore.password": STORE_PASSWORD}, "ssl.truststore.password"),
    ("pem_file", {"ssl.truststore.location": "/nonexistent/truststore.pem"}, "ssl.truststore.location"),
    ("pkcs12", {"ssl.truststore.password": "wrong"}, "ssl.truststore.password"),
    ("jks", {"ssl.truststore.password": "wrong"}, "ssl.truststore.password"),
    ("jks", {"ssl.truststore.type": "PEM", "ssl.truststore.password": None}, "ssl.truststore.location"),
])
def test_truststores_refuse_what_kafka_refuses(broker, truststores, truststore, change, config):
    props = {**truststores[truststore], **change}
    props = {k: v for k, v in props.items() if v is not None}
    for context in (lambda: client_ssl_context(props), lambda: server_ssl_context({**broker, **props})):
        with pytest.raises(ConfigError, match=config.replace(".", r"\.")):
            context()


def test_a_client_refuses_an_unknown_endpoint_identification_algorithm(trusting):
    with pytest.raises(ConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        client_ssl_context({**trusting, "ssl.endpoint.identification.algorithm": "ldap"})


@dataclass
class PeerCertificate:
    der: bytes | None

    def getpeercert(self, binary_form: bool) -> bytes | None:
        assert binary_form
        return self.der


def certificate_of(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_the_dn_is_printed_as_javas_x500_principal_get_name():
    subject = x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "example")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COUNTRY_NAME, "US")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "California")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.LOCALITY_NAME, "Palo Alto")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.STREET_ADDRESS, "1 Main St")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example, Inc.")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                                        x509.NameAttribute(NameOID.USER_ID, "alice")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.EMAIL_ADDRESS, "alice@example.com")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.SERIAL_NUMBER, "42")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, ' a=b+c<d>e#f;g"h\\i\0j ')]),
    ])
    assert peer_principal_dn(PeerCertificate(certificate_of(subject))) == (
        'CN=\\ a\\=b\\+c\\<d\\>e\\#f\\;g\\"h\\\\i\\00j\\ ,'
        "2.5.4.5=#13023432,"
        "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,"
        "OU=eng+UID=alice,"
        "O=Example\\, Inc.,STREET=1 Main St,L=Palo Alto,ST=California,C=US,DC=example,DC=com")


def test_the_dn_keeps_text_java_does_not_escape():
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Zoë  O'Brien (ops)/*@_"),
                         x509.NameAttribute(NameOID.TITLE, "boss")])
    assert peer_principal_dn(PeerCertificate(certificate_of(subject))) == (
        "2.5.4.12=#0c04626f7373,CN=Zoë  O'Brien (ops)/*@_")


def test_no_certificate_no_dn():
    assert peer_principal_dn(PeerCertificate(None)) is None
