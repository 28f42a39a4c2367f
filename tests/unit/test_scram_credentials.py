"""SCRAM credentials as cluster metadata (KIP-554): the keys the controller derives from a client's salted password
(checked against RFC 7677's exchange), Kafka's text form of a credential in ZooKeeper, the controller's validation
of AlterUserScramCredentials as Kafka's ScramControlManager answers it, the records it commits to the metadata log
(replayed by a reopened controller), and DescribeUserScramCredentials' answer from an image."""
from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest

from minikafka.broker.controller import ControllerApis, QuorumController
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.scram_control import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alter_scram_credentials,
)
from minikafka.broker.metadata.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    config_credentials,
    credential_from_salted_password,
    credential_from_string,
    credential_to_string,
    credentials_config,
    user_of_zk_path,
)
from minikafka.broker.server.handlers.scram_credentials import describe_scram_credentials
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.metadata_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from minikafka.storage.metadata_log import decode_entries

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


def salted(mechanism: int, password: str, salt: bytes, iterations: int = MIN_ITERATIONS) -> bytes:
    """SaltedPassword = Hi(password, salt, i), what a client sends in an upsertion."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def upsertion(name: str, mechanism: int = SCRAM_SHA_256, iterations: int = MIN_ITERATIONS,
              password: str = "secret", salt: bytes = b"NaCl") -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name, mechanism, iterations, salt, salted(mechanism, password, salt, iterations)
                                    if mechanism in HASHES else b"x")


def credential(key: bytes, iterations: int = MIN_ITERATIONS) -> ScramCredential:
    return ScramCredential(b"salt", b"stored-" + key, b"server-" + key, iterations)


# ---- the keys and their text form ----------------------------------------------------------------------------------


def test_the_derived_keys_verify_rfc_7677s_exchange() -> None:
    """RFC 7677's SCRAM-SHA-256 example: the stored key recovers the client's proof, and the server key makes the
    server signature the RFC shows."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    derived = credential_from_salted_password(SCRAM_SHA_256, salt, salted(SCRAM_SHA_256, "pencil", salt), 4096)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
                    f"c=biws,r={nonce}").encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_key = bytes(a ^ b for a, b in zip(proof, hmac.digest(derived.stored_key, auth_message, "sha256"),
                                             strict=True))
    assert hashlib.sha256(client_key).digest() == derived.stored_key
    assert base64.b64encode(hmac.digest(derived.server_key, auth_message, "sha256")) == \
        b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert (derived.salt, derived.iterations) == (salt, 4096)


def test_sha_512_keys_are_64_bytes_of_that_hash() -> None:
    salted_password = salted(SCRAM_SHA_512, "pw", b"salt")
    derived = credential_from_salted_password(SCRAM_SHA_512, b"salt", salted_password, 4096)
    client_key = hmac.digest(salted_password, b"Client Key", "sha512")
    assert derived.stored_key == hashlib.sha512(client_key).digest()
    assert derived.server_key == hmac.digest(salted_password, b"Server Key", "sha512")
    assert len(derived.stored_key) == len(derived.server_key) == 64


def test_kafkas_text_form_round_trips_and_keeps_other_user_config_apart() -> None:
    held = ScramCredential(b"\x00\x01salt", b"\xffstored", b"server", 8192)
    text = credential_to_string(held)
    assert text == "salt=AAFzYWx0,stored_key=/3N0b3JlZA==,server_key=c2VydmVy,iterations=8192"
    assert credential_from_string(text) == held
    config = {"producer_byte_rate": "1024", **credentials_config({SCRAM_SHA_512: held})}
    assert sorted(config) == ["SCRAM-SHA-512", "producer_byte_rate"]
    assert config_credentials(config) == {SCRAM_SHA_512: held}
    assert config_credentials({"SCRAM-SHA-256": "salt=@@,stored_key=,server_key=,iterations=1"}) == {}
    for bad in ("salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x", "nonsense"):
        with pytest.raises(ValueError) as caught:
            credential_from_string(bad)
        assert "AA==" not in str(caught.value)


def test_the_users_a_config_change_names() -> None:
    assert user_of_zk_path("users/alice%40example.com") == "alice@example.com"
    assert user_of_zk_path("users/<default>") is None
    assert user_of_zk_path("users/alice/clients/app") is None
    assert user_of_zk_path("clients/alice") is None and user_of_zk_path("topics/t") is None


# ---- the controller's validation -----------------------------------------------------------------------------------


def test_accepted_changes_become_records_with_derived_keys() -> None:
    held = {("alice", SCRAM_SHA_512): credential(b"a")}
    bob = upsertion("bob", SCRAM_SHA_512, iterations=MAX_ITERATIONS, password="pw", salt=b"s1")
    records, results = alter_scram_credentials(held, [ScramCredentialDeletion("alice", SCRAM_SHA_512)],
                                               [bob, upsertion("carol")])
    assert results == [("alice", None), ("bob", None), ("carol", None)]
    removal, bobs, carols = records
    assert removal == RemoveUserScramCredentialRecord(name="alice", mechanism=SCRAM_SHA_512)
    assert isinstance(bobs, UserScramCredentialRecord)
    assert (bobs.name, bobs.mechanism, bobs.salt, bobs.iterations) == ("bob", SCRAM_SHA_512, b"s1", MAX_ITERATIONS)
    expected = credential_from_salted_password(SCRAM_SHA_512, b"s1", bob.salted_password, MAX_ITERATIONS)
    assert (bobs.stored_key, bobs.server_key) == (expected.stored_key, expected.server_key)
    assert bob.salted_password not in (bobs.stored_key, bobs.server_key)
    assert isinstance(carols, UserScramCredentialRecord) and carols.mechanism == SCRAM_SHA_256


def test_refusals_are_kafkas_one_result_per_user() -> None:
    held = {("dave", SCRAM_SHA_256): credential(b"d"), ("erin", SCRAM_SHA_256): credential(b"e")}
    records, results = alter_scram_credentials(
        held,
        [ScramCredentialDeletion("dave", SCRAM_SHA_256), ScramCredentialDeletion("dave", SCRAM_SHA_512),
         ScramCredentialDeletion("erin", SCRAM_SHA_256), ScramCredentialDeletion("frank", SCRAM_SHA_256),
         ScramCredentialDeletion("gina", 3), ScramCredentialDeletion("", SCRAM_SHA_256)],
        [upsertion("erin"), upsertion("few", iterations=MIN_ITERATIONS - 1),
         upsertion("many", iterations=MAX_ITERATIONS + 1), upsertion("odd", mechanism=0),
         upsertion("twice"), upsertion("twice", SCRAM_SHA_512), upsertion("twice"), upsertion("fine")])
    assert records == [UserScramCredentialRecord(
        name="fine", mechanism=SCRAM_SHA_256, salt=b"NaCl", iterations=MIN_ITERATIONS,
        stored_key=records[0].stored_key, server_key=records[0].server_key)]
    answers = {user: (error.code, error.message) if error else None for user, error in results}
    assert [user for user, _ in results] == ["fine", "dave", "frank", "gina", "", "erin", "few", "many", "odd",
                                             "twice"]
    duplicate = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    assert answers == {
        "fine": None,
        "dave": duplicate,
        "frank": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "gina": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "erin": duplicate,  # deleted and upserted
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": duplicate,
    }


# ---- through ControllerApis, over the metadata log -----------------------------------------------------------------


def _open(metadata_dir: Path) -> QuorumController:
    config = QuorumControllerConfig(node_id=3000, cluster_id=CLUSTER, auto_leader_rebalance_enable=False)
    return QuorumController.open(config, metadata_dir)


async def test_alter_through_the_controller_is_committed_and_replayed_on_reopen(tmp_path: Path) -> None:
    metadata_dir = tmp_path / "metadata"
    R = AlterUserScramCredentialsRequest[0]
    password = salted(SCRAM_SHA_256, "alice-secret", b"alice-salt", 5000)
    request = R(deletions=[R.ScramCredentialDeletion(name="nobody", mechanism=SCRAM_SHA_256)], upsertions=[
        R.ScramCredentialUpsertion(name="alice", mechanism=SCRAM_SHA_256, iterations=5000, salt=b"alice-salt",
                                   salted_password=password),
        R.ScramCredentialUpsertion(name="alice-512", mechanism=SCRAM_SHA_512, iterations=4096, salt=b"s",
                                   salted_password=salted(SCRAM_SHA_512, "x", b"s"))])
    controller = _open(metadata_dir)
    try:
        apis = ControllerApis(controller)
        response = await apis.handle(request, 0, None)
        assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
            ("alice", ErrorCode.NONE, None), ("alice-512", ErrorCode.NONE, None),
            ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]
        expected = credential_from_salted_password(SCRAM_SHA_256, b"alice-salt", password, 5000)
        assert controller.image.scram_credentials[("alice", SCRAM_SHA_256)] == expected
        before = dict(controller.image.scram_credentials)
        deleted = await apis.handle(R(deletions=[R.ScramCredentialDeletion(name="alice-512", mechanism=SCRAM_SHA_512)],
                                      upsertions=[]), 0, None)
        assert [(r.user, r.error_code) for r in deleted.results] == [("alice-512", ErrorCode.NONE)]
        written = [e.record for e in decode_entries(await controller.read_metadata(0, 1 << 20), "log")
                   if isinstance(e.record, UserScramCredentialRecord | RemoveUserScramCredentialRecord)]
        assert [(type(r).__name__, r.name) for r in written] == [
            ("UserScramCredentialRecord", "alice"), ("UserScramCredentialRecord", "alice-512"),
            ("RemoveUserScramCredentialRecord", "alice-512")]
    finally:
        controller.close()
    reopened = _open(metadata_dir)
    try:
        assert reopened.image.scram_credentials == {("alice", SCRAM_SHA_256): before[("alice", SCRAM_SHA_256)]}
    finally:
        reopened.close()


# ---- DescribeUserScramCredentials from an image --------------------------------------------------------------------


def test_describe_answers_per_user_as_kafkas_scram_image() -> None:
    held = {("bob", SCRAM_SHA_512): credential(b"b", 8192), ("alice", SCRAM_SHA_512): credential(b"a"),
            ("alice", SCRAM_SHA_256): credential(b"a", 5000)}

    def answers(users: list[str] | None) -> list:
        return [(user, (error.code, error.message) if error else None, infos)
                for user, error, infos in describe_scram_credentials(held, users)]

    everyone = [("alice", None, [(SCRAM_SHA_256, 5000), (SCRAM_SHA_512, 4096)]),
                ("bob", None, [(SCRAM_SHA_512, 8192)])]
    assert answers(None) == answers([]) == everyone
    assert answers(["bob", "zoe", "alice", "bob"]) == [
        ("bob", (ErrorCode.DUPLICATE_RESOURCE,
                 "Cannot describe SCRAM credentials for the same user twice in a single request: bob"), []),
        ("zoe", (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: zoe"), []),
        ("alice", None, [(SCRAM_SHA_256, 5000), (SCRAM_SHA_512, 4096)])]
    assert describe_scram_credentials({}, None) == []
