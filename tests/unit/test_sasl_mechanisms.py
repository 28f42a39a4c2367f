import base64
import random

import pytest
import scramp

from minikafka.broker.security import scram, scram_sasl_server
from minikafka.broker.security.jaas import PLAIN_LOGIN_MODULE, JaasLoginModule
from minikafka.broker.security.sasl_server import (
    CredentialStore,
    SaslAuthenticationError,
    SaslError,
    ScramCredentials,
    create_sasl_server,
)
from minikafka.broker.security.scram import ScramCredential, ScramMechanism
from minikafka.broker.security.scram_sasl_server import ScramState

SHA_256 = ScramMechanism.SCRAM_SHA_256
MECHANISMS = [m.mechanism_name for m in ScramMechanism]
INVALID_PASSWORD = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"


def b64(text: str) -> bytes:
    return base64.b64decode(text)


def credentials_of(entries: dict[tuple[str, ScramMechanism], ScramCredential]) -> ScramCredentials:
    """Credentials as the metadata image keys them: by user and mechanism type id."""
    by_type = {(user, mechanism.type_id): credential for (user, mechanism), credential in entries.items()}
    return ScramCredentials(lambda: by_type)


@pytest.fixture
def scram_entries() -> dict[tuple[str, int], ScramCredential]:
    return {("alice", mechanism.type_id): scram.generate_credential(mechanism, "alice-secret")
            for mechanism in ScramMechanism}


@pytest.fixture
def scram_credentials(scram_entries) -> ScramCredentials:
    return ScramCredentials(lambda: scram_entries)


@pytest.fixture
def store(scram_credentials) -> CredentialStore:
    return CredentialStore({"alice": "alice-secret", "admin": "admin-secret"}, scram_credentials)


# PLAIN

def test_plain_authenticates_a_user_of_the_jaas_options(store):
    server = create_sasl_server("PLAIN", store)
    assert server.mechanism == "PLAIN" and not server.complete
    assert server.evaluate_response(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    same_authzid = create_sasl_server("PLAIN", store)
    same_authzid.evaluate_response(b"admin\0admin\0admin-secret")
    assert same_authzid.authorization_id == "admin"


def test_plain_users_come_from_the_user_options_of_the_login_module():
    module = JaasLoginModule(PLAIN_LOGIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"})
    assert CredentialStore.plain_users_from(module) == {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", INVALID_PASSWORD),
    (b"\0alice\0alice-secre", INVALID_PASSWORD),
    (b"\0mallory\0alice-secret", INVALID_PASSWORD),
    (b"\0al\xffice\0alice-secret", INVALID_PASSWORD),  # not UTF-8: decoded as Java does, then unknown
    (b"admin\0alice\0alice-secret", AUTHZID_MISMATCH),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_plain_refuses_with_kafkas_messages(store, token, message):
    server = create_sasl_server("PLAIN", store)
    with pytest.raises(SaslAuthenticationError) as error:
        server.evaluate_response(token)
    assert str(error.value) == message
    assert not server.complete
    with pytest.raises(RuntimeError):
        server.authorization_id  # noqa: B018


def test_plain_refuses_an_oversized_response_unread(store):
    with pytest.raises(SaslError):
        create_sasl_server("PLAIN", store).evaluate_response(b"\0alice\0" + b"x" * 10_000)


def test_an_unknown_mechanism_is_a_value_error(store):
    with pytest.raises(ValueError, match="GSSAPI"):
        create_sasl_server("GSSAPI", store)


# SCRAM: exchanges with an independent client

def exchange(server, client) -> None:
    client.set_server_first(server.evaluate_response(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate_response(client.get_client_final().encode()).decode())


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_scram_exchange_with_scramp(store, mechanism):
    server = create_sasl_server(mechanism, store)
    assert server.mechanism == mechanism
    exchange(server, scramp.ScramClient([mechanism], "alice", "alice-secret"))  # scramp checks the server's proof
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=MECHANISMS)
def test_scram_user_names_with_comma_and_equals(mechanism):
    credentials = credentials_of({("a,b=c", mechanism): scram.generate_credential(mechanism, "pw", iterations=8192)})
    server = create_sasl_server(mechanism.mechanism_name, CredentialStore({}, credentials))
    exchange(server, scramp.ScramClient([mechanism.mechanism_name], "a,b=c", "pw"))
    assert server.authorization_id == "a,b=c"


def start(server, user: str, password: str = "alice-secret") -> tuple[scramp.ScramClient, str]:
    """A scramp client past the server's first message, and that message."""
    client = scramp.ScramClient([server.mechanism], user, password)
    server_first = server.evaluate_response(client.get_client_first().encode()).decode()
    client.set_server_first(server_first)
    return client, server_first


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_scram_wrong_password_fails_at_the_proof(store, mechanism):
    server = create_sasl_server(mechanism, store)
    client, _ = start(server, "alice", "wrong")
    with pytest.raises(SaslError, match="^Invalid client credentials$"):
        server.evaluate_response(client.get_client_final().encode())
    assert not server.complete and server.state is ScramState.FAILED


def test_an_unknown_user_is_answered_as_a_known_one_and_fails_only_at_the_proof(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    client, server_first = start(server, "mallory")
    _, salt, iterations = (part[2:] for part in server_first.split(","))
    assert iterations == "4096"
    assert 20 <= len(b64(salt)) <= 26 and b64(salt).isalnum() and b64(salt).islower()  # a salt as Kafka makes them
    with pytest.raises(SaslError, match="^Invalid client credentials$"):
        server.evaluate_response(client.get_client_final().encode())
    # The salt is the same at every attempt, as a real user's is, and differs by user and mechanism.
    assert start(create_sasl_server("SCRAM-SHA-256", store), "mallory")[1].split(",")[1] == f"s={salt}"
    assert start(create_sasl_server("SCRAM-SHA-256", store), "trudy")[1].split(",")[1] != f"s={salt}"
    assert start(create_sasl_server("SCRAM-SHA-512", store), "mallory")[1].split(",")[1] != f"s={salt}"


def test_a_removed_credential_no_longer_authenticates(store, scram_entries):
    del scram_entries[("alice", ScramMechanism.SCRAM_SHA_256.type_id)]
    assert store.scram_credential("SCRAM-SHA-256", "alice") is None
    server = create_sasl_server("SCRAM-SHA-256", store)
    client, _ = start(server, "alice")
    with pytest.raises(SaslError, match="^Invalid client credentials$"):
        server.evaluate_response(client.get_client_final().encode())
    exchange(create_sasl_server("SCRAM-SHA-512", store), scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret"))


def test_a_tampered_nonce_fails(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    client, server_first = start(server, "alice")
    nonce = server_first.split(",")[0][2:]
    final = client.get_client_final().replace(f"r={nonce}", f"r={nonce[:-1]}")
    with pytest.raises(SaslError, match=r"^Invalid client nonce in the final client message\.$"):
        server.evaluate_response(final.encode())
    assert server.state is ScramState.FAILED


def test_a_tampered_proof_fails(store):
    server = create_sasl_server("SCRAM-SHA-512", store)
    client, _ = start(server, "alice")
    without_proof, proof = client.get_client_final().split(",p=")
    tampered = bytearray(b64(proof))
    tampered[0] ^= 1
    with pytest.raises(SaslError, match="^Invalid client credentials$"):
        server.evaluate_response(f"{without_proof},p={base64.b64encode(tampered).decode()}".encode())


@pytest.mark.parametrize("proof", [b"", bytes(16), bytes(64)])
def test_a_proof_of_the_wrong_size_fails(store, proof):
    server = create_sasl_server("SCRAM-SHA-256", store)
    client, _ = start(server, "alice")
    without_proof = client.get_client_final().split(",p=")[0]
    with pytest.raises(SaslError, match="^Invalid client credentials$"):
        server.evaluate_response(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def test_a_channel_binding_other_than_the_gs2_header_fails(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    client, _ = start(server, "alice")
    final = client.get_client_final().replace("c=biws,", "c=eSws,")  # "y,,"
    with pytest.raises(SaslError, match="Invalid channel binding"):
        server.evaluate_response(final.encode())


@pytest.mark.parametrize("first", [
    b"y,,n=alice,r=abc",  # the client supports channel binding: not served, as Kafka
    b"p=tls-unique,,n=alice,r=abc",
    b"n=alice,r=abc",
    b"n,,n=alice",
    b"n,,n=,r=abc",
    b"n,,n=alice,r=",
    b"n,,n=al\xc3\xa9ice,r=abc",  # Kafka's names are ASCII
    b"n,,n=al\xffice,r=abc",
    b"",
    b"\x00\x01\x02",
    b"\xff" * 100,
])
def test_a_malformed_client_first_message_fails(store, first):
    server = create_sasl_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslError, match="^Invalid SCRAM client first message format: "):
        server.evaluate_response(first)
    assert server.state is ScramState.FAILED
    with pytest.raises(SaslError, match="^Unexpected challenge in Sasl server state FAILED$"):
        server.evaluate_response(b"n,,n=alice,r=abc")


@pytest.mark.parametrize("final", [b"garbage", b"c=biws", b"c=biws,r=x,p=A", b"\xff\xfe", b"", b"c=biws,r=a b,p=AAAA"])
def test_a_malformed_client_final_message_fails(store, final):
    server = create_sasl_server("SCRAM-SHA-256", store)
    start(server, "alice")
    with pytest.raises(SaslError, match="^Invalid SCRAM client final message format: "):
        server.evaluate_response(final)


def test_an_oversized_response_fails_unread(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslError, match="bytes"):
        server.evaluate_response(b"n,,n=alice,r=" + b"a" * 10_000)


def test_an_invalid_sasl_name_fails(store):
    with pytest.raises(SaslError, match="^Invalid SCRAM client first message format: "):
        create_sasl_server("SCRAM-SHA-256", store).evaluate_response(b"n,,n=al=3ice,r=abc")
    with pytest.raises(ValueError, match="^Invalid username: al=3ice$"):
        scram.username("al=3ice")


def test_an_authorization_id_must_be_the_user(store):
    with pytest.raises(SaslAuthenticationError) as error:
        create_sasl_server("SCRAM-SHA-256", store).evaluate_response(b"n,a=admin,n=alice,r=abc")
    assert str(error.value) == AUTHZID_MISMATCH


def test_an_authorization_id_equal_to_the_user_authenticates(store):
    """The channel binding is then the base64 of `n,a=alice,`."""
    server = create_sasl_server("SCRAM-SHA-256", store)
    first_bare = "n=alice,r=clientnonce"
    server_first = server.evaluate_response(f"n,a=alice,{first_bare}".encode()).decode()
    nonce, salt, iterations = (part[2:] for part in server_first.split(","))
    without_proof = f"c={base64.b64encode(b'n,a=alice,').decode()},r={nonce}"
    salted = scram.salted_password(SHA_256, "alice-secret", b64(salt), int(iterations))
    proof = scram.client_proof(SHA_256, salted, scram.auth_message(first_bare, server_first, without_proof))
    server.evaluate_response(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("value", ["true", "TRUE"])
def test_delegation_tokens_are_refused(store, value):
    server = create_sasl_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslAuthenticationError, match="delegation tokens"):
        server.evaluate_response(f"n,,n=alice,r=abc,tokenauth={value}".encode())


def test_other_extensions_are_ignored(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    assert server.evaluate_response(b"n,,n=alice,r=abc,tokenauth=false,foo=b=ar").startswith(b"r=abc")


def test_a_credential_of_fewer_iterations_than_the_minimum_fails():
    credentials = credentials_of({("alice", SHA_256): scram.generate_credential(SHA_256, "pw", iterations=1000)})
    server = create_sasl_server("SCRAM-SHA-256", CredentialStore({}, credentials))
    with pytest.raises(SaslError, match="^Iterations 1000 is less than the minimum 4096 for SCRAM_SHA_256$"):
        server.evaluate_response(b"n,,n=alice,r=abc")


def test_nothing_more_is_read_once_complete(store):
    server = create_sasl_server("SCRAM-SHA-256", store)
    exchange(server, scramp.ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret"))
    with pytest.raises(SaslError, match="state COMPLETE"):
        server.evaluate_response(b"")


# SCRAM: RFC 7677's example, with the formatter and with the server.

RFC_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
RFC_CLIENT_FIRST = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = f"r=rOprNGfwEbeRWgbNEkqO{RFC_SERVER_NONCE},s={RFC_SALT},i=4096"
RFC_FINAL_WITHOUT_PROOF = f"c=biws,r=rOprNGfwEbeRWgbNEkqO{RFC_SERVER_NONCE}"
RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc_7677_known_answer_with_the_formatter():
    salted = scram.salted_password(SHA_256, "pencil", b64(RFC_SALT), 4096)
    message = scram.auth_message(RFC_CLIENT_FIRST[3:], RFC_SERVER_FIRST, RFC_FINAL_WITHOUT_PROOF)
    assert scram.client_proof(SHA_256, salted, message) == b64(RFC_PROOF)
    assert scram.server_signature(SHA_256, scram.server_key(SHA_256, salted), message) == b64(RFC_SERVER_FINAL[2:])


def test_rfc_7677_known_answer_with_the_server(monkeypatch):
    monkeypatch.setattr(scram_sasl_server, "secure_random_string", lambda: RFC_SERVER_NONCE)
    credentials = credentials_of({("user", SHA_256): scram.generate_credential(SHA_256, "pencil", 4096,
                                                                              b64(RFC_SALT))})
    server = create_sasl_server("SCRAM-SHA-256", CredentialStore({}, credentials))
    assert server.evaluate_response(RFC_CLIENT_FIRST.encode()).decode() == RFC_SERVER_FIRST
    assert server.evaluate_response(f"{RFC_FINAL_WITHOUT_PROOF},p={RFC_PROOF}".encode()).decode() == RFC_SERVER_FINAL
    assert server.authorization_id == "user"


# SCRAM credentials and names

def test_credential_string_round_trip_and_kafkas_form():
    credential = scram.generate_credential(SHA_256, "pencil", 8192)
    text = scram.credential_to_string(credential)
    assert text.startswith(f"salt={base64.b64encode(credential.salt).decode()},stored_key=")
    assert text.endswith(",iterations=8192")
    assert scram.credential_from_string(text) == credential
    assert scram.credential_from_string("iterations=4096,server_key=AQI=,stored_key=AwQ=,salt=BQY=") == ScramCredential(
        b"\5\6", b"\3\4", b"\1\2", 4096)


@pytest.mark.parametrize("text", [
    "",
    "salt=AA==",
    "salt=AA==,stored_key=AA==,server_key=AA==",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
    "salt=A,stored_key=AA==,server_key=AA==,iterations=4096",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=1,a=b",
    "=AA==,stored_key=AA==,server_key=AA==,iterations=1",
    "salt,stored_key=AA==,server_key=AA==,iterations=1",
])
def test_an_invalid_credential_string_is_a_value_error(text):
    with pytest.raises(ValueError, match="^Credentials not valid"):
        scram.credential_from_string(text)


def test_generated_salts_are_random_base36_as_kafkas():
    salts = {scram.generate_credential(SHA_256, "pw").salt for _ in range(20)}
    assert len(salts) == 20
    assert all(s.decode().isalnum() and len(s) <= 26 for s in salts)


@pytest.mark.parametrize("name, sasl_name", [("alice", "alice"), ("a,b", "a=2Cb"), ("a=b", "a=3Db"), ("=,", "=3D=2C")])
def test_sasl_names(name, sasl_name):
    assert scram.username(sasl_name) == name


def test_mechanisms():
    assert [(m.mechanism_name, m.hash_name, m.type_id, m.min_iterations) for m in ScramMechanism] == [
        ("SCRAM-SHA-256", "sha256", 1, 4096), ("SCRAM-SHA-512", "sha512", 2, 4096)]
    assert ScramMechanism.for_mechanism_name("SCRAM-SHA-1") is None


# Whatever a client sends, a mechanism answers or raises one of the two SASL errors.

def mutations(seed: int, valid: bytes, count: int) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = b"nyp,=acrsvi2CD3\x00\xff\xc3\xa9 +/AZ09"
    out = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(count)]
    for _ in range(count):
        token = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(token) + 1)
            if rng.random() < 0.5 and position < len(token):
                del token[position]
            else:
                token.insert(position, rng.choice(alphabet))
        out.append(bytes(token))
    return out


def test_plain_never_raises_anything_else(store):
    for token in mutations(1, b"alice\0alice\0alice-secret", 300):
        try:
            create_sasl_server("PLAIN", store).evaluate_response(token)
        except (SaslAuthenticationError, SaslError):
            pass


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_scram_never_raises_anything_else(store, mechanism, monkeypatch):
    for token in mutations(2, b"n,a=alice,n=alice,r=abc,tokenauth=false", 300):
        try:
            create_sasl_server(mechanism, store).evaluate_response(token)
        except (SaslAuthenticationError, SaslError):
            pass
    monkeypatch.setattr(scram_sasl_server, "secure_random_string", lambda: "servernonce")
    client = scramp.ScramClient([mechanism], "alice", "alice-secret", c_nonce="clientnonce")
    first = client.get_client_first().encode()
    client.set_server_first(create_sasl_server(mechanism, store).evaluate_response(first).decode())
    for token in mutations(3, client.get_client_final().encode(), 300):
        server = create_sasl_server(mechanism, store)
        server.evaluate_response(first)
        try:
            server.evaluate_response(token)
        except (SaslAuthenticationError, SaslError):
            pass
