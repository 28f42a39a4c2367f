"""The inter-broker NetworkClient secured as the listener it connects to asks: TLS and SASL before any request,
within socket.connection.setup.timeout.ms, the session renewed on the same connection before it ends (KIP-368), a
refused login logged once and retried only after the reconnect backoff, the server's host name checked unless
ssl.endpoint.identification.algorithm is empty."""
from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path

import pytest
import trio
import trustme
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.network.network_client import DisconnectedError, NetworkClient, NetworkClientConfig
from minikafka.broker.security.client_security import ClientChannelSecurity, inter_broker_security
from minikafka.broker.server.broker_server import BrokerServer
from minikafka.config import BrokerConfig
from tests.node_support import start_broker_with_topic

NODE = 2
TOPIC = "secured"
TEST_TIMEOUT_S = 20
PREFIX = "listener.name.sasl_ssl."
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
FAST = NetworkClientConfig(connection_setup_timeout_ms=5000, reconnect_backoff_ms=300, reconnect_backoff_max_ms=300,
                           request_timeout_ms=5000)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA and a certificate for 127.0.0.1 only (so `localhost` does not match it), as PEM files."""
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    return {"ca": str(directory / "ca.pem"), "server": str(directory / "server.pem")}


def listener_props(tls_files: dict[str, str], password: str = "admin-secret", **overrides: str) -> dict[str, str]:
    """A node whose one listener is SASL_SSL: its users (admin) and its own login (admin with `password`)."""
    return {
        "node.id": str(NODE), "listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        f"{PREFIX}plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="admin" password="{password}" user_admin="admin-secret";',
        f"{PREFIX}ssl.keystore.type": "PEM", f"{PREFIX}ssl.keystore.location": tls_files["server"],
        f"{PREFIX}ssl.truststore.type": "PEM", f"{PREFIX}ssl.truststore.location": tls_files["ca"],
        **overrides}


async def start_broker(nursery: trio.Nursery, tmp_path: Path, props: dict[str, str]) -> BrokerServer:
    return await start_broker_with_topic(nursery, BrokerConfig({**props, "log.dirs": str(tmp_path / "data")}),
                                         TOPIC, 1)


def security_of(props: dict[str, str]) -> ClientChannelSecurity:
    security = inter_broker_security(BrokerConfig(props))
    assert security is not None and security.ssl_context is not None and security.sasl_login is not None
    return security


def metadata_request() -> MetadataRequest:
    return MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                               allow_auto_topic_creation=False)


async def test_requests_go_over_tls_and_sasl_and_the_session_is_renewed_before_it_ends(tmp_path, tls_files):
    props = listener_props(tls_files, **{"connections.max.reauth.ms": "1000"})
    config = dataclasses.replace(FAST, security=security_of(props))
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await start_broker(nursery, tmp_path, props)
            async with NetworkClient.open(NODE, *server.bound_addresses[0], "broker-1-fetcher-0", config) as client:
                metadata = await client.send(metadata_request())
                connections = set(server.socket_server.connections)
                await trio.sleep(1.2)  # past the session's end: the broker would close the connection at the next
                versions = await client.send(ApiVersionsRequest[3](client_software_name="minikafka",  # request
                                                                   client_software_version="0"))
                assert set(server.socket_server.connections) == connections  # renewed on the same connection
                principals = {c.principal for c in server.socket_server.connections.values()}
            server.stop()
    assert [t.name for t in metadata.topics] == [TOPIC] and versions.error_code == 0
    assert principals == {"User:admin"}


async def test_a_wrong_password_is_logged_once_and_retried_after_the_backoff(tmp_path, tls_files, caplog):
    wrong = security_of(listener_props(tls_files, password="wrong"))
    caplog.set_level(logging.INFO, "minikafka.network_client")
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await start_broker(nursery, tmp_path, listener_props(tls_files))
            host, port = server.bound_addresses[0]
            async with NetworkClient.open(NODE, host, port, "broker-1-fetcher-0",
                                          dataclasses.replace(FAST, security=wrong)) as client:
                for _ in range(2):
                    with pytest.raises(DisconnectedError, match="SASL/PLAIN authentication to node 2 failed: "
                                                                "Authentication failed: Invalid username or password"):
                        await client.send(metadata_request())
                started = trio.current_time()
                with pytest.raises(DisconnectedError):
                    await client.send(metadata_request())
                waited = trio.current_time() - started
            server.stop()
    assert waited >= 0.3 * 0.8  # reconnect.backoff.ms, less Kafka's jitter: never a tight loop
    # The broker's own log lines: a client another test left running may log its own errors here meanwhile.
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("minikafka")]
    assert errors == [f"authentication to node 2 at {host}:{port} failed: SASL/PLAIN: Authentication failed: "
                      "Invalid username or password"]


@pytest.mark.parametrize("algorithm", ["https", ""])
async def test_the_server_host_name_is_checked_unless_the_algorithm_is_empty(tmp_path, tls_files, algorithm):
    client_props = listener_props(tls_files, **{f"{PREFIX}ssl.endpoint.identification.algorithm": algorithm})
    config = dataclasses.replace(FAST, security=security_of(client_props))
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await start_broker(nursery, tmp_path, listener_props(tls_files))
            port = server.bound_addresses[0][1]
            async with NetworkClient.open(NODE, "localhost", port, "broker-1-fetcher-0", config) as client:
                if algorithm:
                    with pytest.raises(DisconnectedError, match="TLS handshake with node 2 at localhost:.* failed: "
                                                                ".*certificate verify failed"):
                        await client.send(metadata_request())
                else:
                    assert [t.name for t in (await client.send(metadata_request())).topics] == [TOPIC]
            server.stop()


async def test_a_client_certificate_comes_from_the_listener_keystore(tmp_path, tls_files):
    props = listener_props(tls_files, **{f"{PREFIX}ssl.client.auth": "required"})
    without_keystore = {k: v for k, v in props.items() if not k.startswith(f"{PREFIX}ssl.keystore")}
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await start_broker(nursery, tmp_path, props)
            address = server.bound_addresses[0]
            async with NetworkClient.open(NODE, *address, "broker-1-fetcher-0",
                                          dataclasses.replace(FAST, security=security_of(props))) as client:
                assert (await client.send(metadata_request())).topics[0].name == TOPIC
            async with NetworkClient.open(NODE, *address, "broker-1-fetcher-0",
                                          dataclasses.replace(FAST, security=security_of(without_keystore))) as client:
                with pytest.raises(DisconnectedError):
                    await client.send(metadata_request())
            server.stop()


async def test_a_tls_handshake_that_never_answers_ends_at_the_setup_timeout(tls_files):
    config = dataclasses.replace(FAST, connection_setup_timeout_ms=300, security=security_of(listener_props(tls_files)))
    accepted: list[trio.SocketStream] = []

    async def silent(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        await trio.sleep_forever()

    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            [listener] = await nursery.start(functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
            port = listener.socket.getsockname()[1]
            async with NetworkClient.open(NODE, "127.0.0.1", port, "broker-1-fetcher-0", config) as client:
                started = trio.current_time()
                with pytest.raises(DisconnectedError, match="timed out after 300 ms"):
                    await client.send(metadata_request())
                assert trio.current_time() - started < 2
            nursery.cancel_scope.cancel()
    assert len(accepted) == 1
