"""SCRAM credentials (KIP-554) on real brokers, in both controller modes: confluent-kafka's AdminClient (librdkafka
salts the password itself, as the Java client does) creates, describes and deletes them through one broker of two,
every broker describes the change, refusals come back with Kafka's codes and messages on the wire (kafka-python's
schemas), a restarted broker still has them, and in ZooKeeper mode they sit beside the user's quotas in
/config/users/<user>, in Kafka's text form. In process, the credential a broker's metadata image holds is the one
the password derives."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import trio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

import minikafka
from minikafka.broker.kafka_node import KafkaNode
from minikafka.broker.metadata.scram_credentials import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    credential_from_salted_password,
    credential_from_string,
)
from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection

WAIT_S = 30.0
ADMIN_TIMEOUT_S = 30.0
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISMS = {SCRAM_SHA_256: ScramMechanism.SCRAM_SHA_256, SCRAM_SHA_512: ScramMechanism.SCRAM_SHA_512}

Described = dict[str, list[tuple[int, int]]]  # credentials by user, as (mechanism type, iterations)


def upsert(admin: AdminClient, user: str, mechanism: int, password: bytes, iterations: int = 4096) -> None:
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(MECHANISMS[mechanism], iterations), password)])
    futures[user].result(ADMIN_TIMEOUT_S)


def refused_code(future) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(ADMIN_TIMEOUT_S)
    code: int = caught.value.args[0].code()
    return code


def described_by_admin(admin: AdminClient) -> Described:
    found = admin.describe_user_scram_credentials().result(ADMIN_TIMEOUT_S)
    return {user: sorted((info.mechanism.value, info.iterations) for info in d.scram_credential_infos)
            for user, d in found.items()}


def alter(conn: RawConnection, deletions: list[tuple[str, int]],
          upsertions: list[tuple[str, int, int]]) -> dict[str, tuple[int, str | None]]:
    """Results by user; upsertions as (user, mechanism, iterations) with a made-up salted password."""
    R = AlterUserScramCredentialsRequest[0]
    response = conn.request(R(
        deletions=[R.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
        upsertions=[R.ScramCredentialUpsertion(name=n, mechanism=m, iterations=i, salt=b"salt",
                                               salted_password=b"x" * 32) for n, m, i in upsertions]))
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(conn: RawConnection, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    R = DescribeUserScramCredentialsRequest[0]
    response = conn.request(R(users=None if users is None else [R.UserName(name=u) for u in users]))
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    return [(r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results]


def described(bootstrap: str) -> Described:
    with RawConnection(bootstrap) as conn:
        return {user: infos for user, _, _, infos in describe(conn, None)}


def wait_described_everywhere(cluster: minikafka.Cluster, expected: Described) -> None:
    for broker in cluster.brokers:
        wait_until(lambda b=broker: described(b.bootstrap_servers) == expected, timeout=WAIT_S,
                   message=f"broker {broker.node_id} to describe the credentials as {expected}")


def set_quota(conn: RawConnection, user: str, key: str, value: float) -> None:
    R = AlterClientQuotasRequest[1]
    response = conn.request(R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntryData.EntityData(entity_type="user", entity_name=user)],
        ops=[R.EntryData.OpData(key=key, value=value, remove=False)])]))
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE]


def quotas_of(bootstrap: str, user: str) -> dict[str, float]:
    R = DescribeClientQuotasRequest[1]
    with RawConnection(bootstrap) as conn:
        response = conn.request(R(strict=True, components=[R.ComponentData(entity_type="user", match_type=0,
                                                                            match=user)]))
    return {v.key: v.value for entry in response.entries for v in entry.values}


def user_znode(connect: str, user_path: str) -> dict[str, str]:
    from kazoo.client import KazooClient  # ZooKeeper mode only

    zk = KazooClient(hosts=connect)
    zk.start(timeout=WAIT_S)
    try:
        config: dict[str, str] = json.loads(zk.get(f"/config/users/{user_path}")[0])["config"]
        return config
    finally:
        zk.stop()
        zk.close()


def assert_derived_from(text: str, mechanism: int, password: bytes) -> None:
    """The credential a znode holds is the one Kafka derives from the password and the salt the client chose."""
    held = credential_from_string(text)
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password, held.salt, held.iterations)
    assert held == credential_from_salted_password(mechanism, held.salt, salted, held.iterations)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_scram_credentials_through_a_real_admin_client_on_every_broker(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        first, second = cluster.brokers
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
        with RawConnection(first.bootstrap_servers) as conn:
            set_quota(conn, "alice", "producer_byte_rate", 1024.0)  # the user's znode exists before its credentials

        # Kafka alters one credential per user and request: alice twice in one request is refused whole.
        twice = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"a"),
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"a")])
        assert refused_code(twice["alice"]) == KafkaError.DUPLICATE_RESOURCE
        upsert(admin, "alice", SCRAM_SHA_256, b"alice-256")
        upsert(admin, "alice", SCRAM_SHA_512, b"alice-512", iterations=8192)
        upsert(admin, "bob@example.com", SCRAM_SHA_512, b"bob")
        everyone = {"alice": [(SCRAM_SHA_256, 4096), (SCRAM_SHA_512, 8192)], "bob@example.com": [(SCRAM_SHA_512, 4096)]}
        wait_described_everywhere(cluster, everyone)  # librdkafka picks the broker it sends each request to
        assert described_by_admin(admin) == everyone
        assert quotas_of(second.bootstrap_servers, "alice") == {"producer_byte_rate": 1024.0}
        if zookeeper:
            alice = user_znode(cluster.zookeeper_connect, "alice")
            assert sorted(alice) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"]
            assert_derived_from(alice["SCRAM-SHA-256"], SCRAM_SHA_256, b"alice-256")
            assert_derived_from(alice["SCRAM-SHA-512"], SCRAM_SHA_512, b"alice-512")
            assert_derived_from(user_znode(cluster.zookeeper_connect, "bob%40example.com")["SCRAM-SHA-512"],
                                SCRAM_SHA_512, b"bob")

        with RawConnection(second.bootstrap_servers) as conn:
            # The broker a change went through describes it at once.
            assert alter(conn, [], [("dan", SCRAM_SHA_256, 4096)]) == {"dan": (ErrorCode.NONE, None)}
            assert describe(conn, ["dan"]) == [("dan", ErrorCode.NONE, None, [(SCRAM_SHA_256, 4096)])]
            assert alter(conn, [("dan", SCRAM_SHA_256)], []) == {"dan": (ErrorCode.NONE, None)}
            assert describe(conn, ["dan"])[0][1] == ErrorCode.RESOURCE_NOT_FOUND
            assert alter(conn, [("nobody", SCRAM_SHA_256), ("bob@example.com", SCRAM_SHA_512)], [
                ("few", SCRAM_SHA_256, 4095), ("many", SCRAM_SHA_512, 16385), ("odd", 7, 4096), ("", 1, 4096),
                ("bob@example.com", SCRAM_SHA_256, 4096)]) == {
                "nobody": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
                "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
                "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
                "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
                "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
                "bob@example.com": (ErrorCode.DUPLICATE_RESOURCE,
                                    "A user credential cannot be altered twice in the same request")}
            assert describe(conn, ["alice", "zoe", "alice", "bob@example.com"]) == [
                ("alice", ErrorCode.DUPLICATE_RESOURCE,
                 "Cannot describe SCRAM credentials for the same user twice in a single request: alice", []),
                ("zoe", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: zoe",
                 []),
                ("bob@example.com", ErrorCode.NONE, None, [(SCRAM_SHA_512, 4096)])]
        wait_described_everywhere(cluster, everyone)  # the refusals changed nothing, dan came and went

        deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice",
                                                                                  ScramMechanism.SCRAM_SHA_256)])
        deleted["alice"].result(ADMIN_TIMEOUT_S)
        assert refused_code(admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "alice", ScramMechanism.SCRAM_SHA_256)])["alice"]) == KafkaError.RESOURCE_NOT_FOUND
        del admin  # librdkafka's handle goes now, not reconnecting to the broker about to restart
        after = {"alice": [(SCRAM_SHA_512, 8192)], "bob@example.com": [(SCRAM_SHA_512, 4096)]}
        wait_described_everywhere(cluster, after)
        if zookeeper:
            assert sorted(user_znode(cluster.zookeeper_connect, "alice")) == ["SCRAM-SHA-512", "producer_byte_rate"]

        # A restarted broker has them (KRaft: replayed from the metadata log; ZooKeeper: read from the znodes).
        second.restart()
        assert described(second.bootstrap_servers) == after
        assert quotas_of(second.bootstrap_servers, "alice") == {"producer_byte_rate": 1024.0}


async def test_the_image_holds_the_credential_the_password_derives(tmp_path: Path) -> None:
    """What SASL/SCRAM authentication reads: `metadata_cache.image.scram_credentials` of a running broker, after a
    real client (librdkafka) sent its salted password."""
    config = BrokerConfig({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)})
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            node: KafkaNode = await nursery.start(KafkaNode(config).run)
            broker = node.broker
            assert broker is not None
            host, port = broker.bound_addresses[0]

            def alter_through_a_client() -> None:
                admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
                upsert(admin, "carol", SCRAM_SHA_256, b"carol-secret", iterations=5000)

            await trio.to_thread.run_sync(alter_through_a_client)
            held = broker.metadata_cache.image.scram_credentials[("carol", SCRAM_SHA_256)]
            salted = hashlib.pbkdf2_hmac("sha256", b"carol-secret", held.salt, 5000)
            assert held == credential_from_salted_password(SCRAM_SHA_256, held.salt, salted, 5000)
            assert held.iterations == 5000 and len(held.salt) > 0
            broker.stop()
