"""TLS and SASL listeners against real clients: confluent-kafka, kafka-python and aiokafka, as users configure them
(`Broker.client_config`), plus raw-socket checks of what Kafka refuses before authentication."""
from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

import minikafka
from minikafka.protocol.schema_loading import quiet_schema_loading
from tests.raw_client import RawConnection

with quiet_schema_loading():
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

TIMEOUT_S = 30.0


def _values(n: int) -> list[bytes]:
    return [f"record-{i}".encode() for i in range(n)]


def _confluent_round_trip(config: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({**config, "linger.ms": 0})
    delivered = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None] * len(values)
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def _kafka_python_round_trip(config: dict, topic: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**config)
    try:
        for value in values:
            producer.send(topic, value).get(TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, **config, auto_offset_reset="earliest", group_id=None,
                             consumer_timeout_ms=int(TIMEOUT_S * 1000))
    got: list[bytes] = []
    try:
        for record in consumer:
            got.append(record.value)
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    return got


def _aiokafka_round_trip(config: dict, topic: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **config, auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == len(values):
                        break
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


ROUND_TRIPS = {"confluent": _confluent_round_trip, "kafka-python": _kafka_python_round_trip,
               "aiokafka": _aiokafka_round_trip}


@pytest.fixture(scope="module", params=["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def secured(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(request.param.lower())
    with minikafka.Broker(security=request.param, users={"alice": "alice-secret"}, data_dir=base / "data",
                          log_path=base / "broker.log") as broker:
        yield broker


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_each_client_produces_and_consumes_on_a_secured_listener(secured, client):
    topic = f"secured-{client}-{uuid.uuid4().hex[:6]}"
    values = _values(20)
    config = secured.client_config(user="alice", client=client)
    assert ROUND_TRIPS[client](config, topic, values) == values
    assert [r.value for r in secured.state.records(topic, 0)] == values  # the handle reads as admin


def errors_into(errors: list[str]):
    return lambda err: errors.append(str(err))


def test_wrong_password_is_refused_with_kafkas_message_and_writes_nothing(tmp_path):
    with minikafka.Broker(security="SASL_PLAINTEXT", users={"alice": "alice-secret"}, data_dir=tmp_path / "d",
                          log_path=tmp_path / "broker.log") as broker:
        topic = f"denied-{uuid.uuid4().hex[:6]}"
        broker.state.create_topic(topic, 1)
        for user, password in (("alice", "wrong"), ("mallory", "whatever")):
            config = {**broker.client_config(user="alice"), "sasl.username": user, "sasl.password": password}
            errors: list[str] = []
            delivered: list[object] = []
            producer = Producer({**config, "error_cb": errors_into(errors), "message.timeout.ms": 3000})
            producer.produce(topic, b"never", on_delivery=lambda err, msg, into=delivered: into.append(err))
            assert producer.flush(10) == 0
            assert len(delivered) == 1 and delivered[0] is not None  # timed out, never written
            assert any("Authentication failed: Invalid username or password" in e for e in errors), errors
        assert broker.state.records(topic, 0) == []


def test_metadata_gives_the_addresses_of_the_listener_asked(secured):
    admin = AdminClient(secured.client_config(user="alice"))
    brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
    assert [f"{b.host}:{b.port}" for b in brokers.values()] == [secured.bootstrap_servers]


@pytest.fixture(scope="module")
def sasl_plaintext(tmp_path_factory):
    base = tmp_path_factory.mktemp("sasl-plaintext")
    with minikafka.Broker(security="SASL_PLAINTEXT", users={"alice": "alice-secret"}, data_dir=base / "data",
                          log_path=base / "broker.log",
                          config={"connections.max.reauth.ms": 1500}) as broker:
        yield broker


def _plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_a_request_before_authentication_closes_the_connection_without_a_response(sasl_plaintext):
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        assert raw.request(ApiVersionsRequest[3](client_software_name="raw", client_software_version="1")) \
            .error_code == 0
        raw.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
        assert raw.read_frame() is None
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:  # SaslAuthenticate before SaslHandshake
        raw.send(SaslAuthenticateRequest[2](auth_bytes=_plain_token("alice", "alice-secret")))
        assert raw.read_frame() is None


def test_unsupported_mechanism_is_answered_with_the_enabled_ones(sasl_plaintext):
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        response = raw.request(SaslHandshakeRequest[1](mechanism="GSSAPI"))
        assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        assert raw.read_frame() is None  # and the connection is closed after the failed-authentication delay


def test_v0_handshake_then_raw_tokens(sasl_plaintext):
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        assert raw.request(SaslHandshakeRequest[0](mechanism="PLAIN")).error_code == 0
        token = _plain_token("alice", "alice-secret")
        raw.send_bytes(struct.pack(">i", len(token)) + token)
        assert raw.read_frame() == b""  # PLAIN's empty server token, size-prefixed
        metadata = raw.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False))
        assert [b.port for b in metadata.brokers] == [sasl_plaintext.port]


def test_session_lifetime_and_reauthentication(sasl_plaintext):
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        answer = raw.request(SaslAuthenticateRequest[2](auth_bytes=_plain_token("alice", "alice-secret")))
        assert (answer.error_code, answer.session_lifetime_ms) == (0, 1500)
        # A second SaslAuthenticate inside the session is the broker APIs' ILLEGAL_SASL_STATE.
        late = raw.request(SaslAuthenticateRequest[2](auth_bytes=b""))
        assert late.error_code == 34
        # Re-authentication on the same connection, as the same user, renews the session.
        assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        again = raw.request(SaslAuthenticateRequest[2](auth_bytes=_plain_token("alice", "alice-secret")))
        assert (again.error_code, again.session_lifetime_ms) == (0, 1500)
        time.sleep(1.7)  # past the session: the next request closes the connection
        raw.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
        assert raw.read_frame() is None


def test_confluent_consumer_reauthenticates_during_a_long_consume(sasl_plaintext):
    """librdkafka re-authenticates before the 1.5 s sessions end (KIP-368): records produced for 5 s all arrive."""
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    sasl_plaintext.state.create_topic(topic, 1)
    config = sasl_plaintext.client_config(user="alice")
    errors: list[str] = []
    producer = Producer({**config, "linger.ms": 0, "error_cb": lambda err: errors.append(str(err))})
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "error_cb": lambda err: errors.append(str(err))})
    consumer.subscribe([topic])
    sent, got = 0, []
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            producer.produce(topic, str(sent).encode())
            producer.poll(0)
            sent += 1
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(int(message.value()))
        assert producer.flush(TIMEOUT_S) == 0
        tail_deadline = time.monotonic() + TIMEOUT_S
        while len(got) < sent and time.monotonic() < tail_deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(int(message.value()))
    finally:
        consumer.close()
    assert got == list(range(sent))
    assert not [e for e in errors if "Authentication" in e], errors


def test_sasl_handshake_on_a_plaintext_listener_is_illegal_sasl_state(broker):
    with RawConnection(broker.bootstrap_servers) as raw:
        assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 34


@pytest.fixture(scope="module")
def mutual_tls(tmp_path_factory):
    base = tmp_path_factory.mktemp("mtls")
    with minikafka.Broker(security="SSL", ssl_client_auth="required", data_dir=base / "data",
                          log_path=base / "broker.log") as broker:
        yield broker


def test_mutual_tls_needs_a_client_certificate(mutual_tls):
    topic = f"mtls-{uuid.uuid4().hex[:6]}"
    config = mutual_tls.client_config(user="alice")
    assert _confluent_round_trip(config, topic, _values(3)) == _values(3)
    without = {k: v for k, v in config.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    admin = AdminClient({**without, "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


@pytest.mark.parametrize("secured", ["SSL", "SASL_SSL"], indirect=True)
def test_plaintext_bytes_to_a_tls_port_close_the_connection(secured):
    host, port = secured.bootstrap_servers.rsplit(":", 1)
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id="plaintext")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        received = []
        while chunk := sock.recv(1 << 16):  # at most a TLS alert, then the close
            received.append(chunk)
        assert not b"".join(received).startswith(b"\0")  # no Kafka response
    # The broker still serves TLS clients.
    context = ssl.create_default_context(cafile=str(secured.security.ca_file))
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock, \
            context.wrap_socket(sock, server_hostname=host) as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def _authenticate(raw: RawConnection, user: str, password: str) -> int:
    assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
    return raw.request(SaslAuthenticateRequest[2](auth_bytes=_plain_token(user, password))).error_code


def test_fault_fails_one_users_authentication_until_cleared(tmp_path):
    with minikafka.Broker(security="SASL_PLAINTEXT", users={"alice": "a-secret", "bob": "b-secret"},
                          data_dir=tmp_path / "d", log_path=tmp_path / "broker.log") as broker:
        fault = broker.faults.fail_authentication("alice")
        assert {"kind": "auth-failure", "user": "alice"}.items() <= broker.faults.list()[0].items()
        with RawConnection(broker.bootstrap_servers) as raw:
            assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
            refused = raw.request(SaslAuthenticateRequest[2](auth_bytes=_plain_token("alice", "a-secret")))
            assert (refused.error_code, refused.error_message) == \
                (58, "Authentication failed: Invalid username or password")
            assert raw.read_frame() is None
        with RawConnection(broker.bootstrap_servers) as raw:
            assert _authenticate(raw, "bob", "b-secret") == 0
        assert fault.hits == 1  # alice's authentication, not bob's
        fault.clear()
        assert fault.hits == 1 and not fault.active
        with RawConnection(broker.bootstrap_servers) as raw:
            assert _authenticate(raw, "alice", "a-secret") == 0


def test_expired_sessions_close_at_the_next_request_and_clients_come_back(tmp_path):
    with minikafka.Broker(security="SASL_PLAINTEXT", users={"alice": "a-secret"}, data_dir=tmp_path / "d",
                          log_path=tmp_path / "broker.log") as broker:
        topic = f"expire-{uuid.uuid4().hex[:6]}"
        broker.state.create_topic(topic, 1)
        producer = Producer({**broker.client_config(user="alice"), "linger.ms": 0})
        producer.produce(topic, b"before")
        assert producer.flush(TIMEOUT_S) == 0
        with RawConnection(broker.bootstrap_servers) as raw:
            assert _authenticate(raw, "alice", "a-secret") == 0
            assert broker.faults.expire_sessions("alice") >= 2  # the producer's connection and this one
            raw.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
            assert raw.read_frame() is None
        producer.produce(topic, b"after")  # librdkafka reconnects and authenticates again
        assert producer.flush(TIMEOUT_S) == 0
        assert [r.value for r in broker.state.records(topic, 0)] == [b"before", b"after"]


def test_malformed_and_oversized_sasl_tokens_are_refused_and_others_still_served(sasl_plaintext):
    for token in (b"", b"\xff\xfe\xfd", b"\0alice", b"a\0b\0c\0d", b"\0alice\0" + b"x" * 9000):
        with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
            assert raw.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
            answer = raw.request(SaslAuthenticateRequest[2](auth_bytes=token))
            assert answer.error_code == 58, token
            assert raw.read_frame() is None
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:  # a frame over sasl.server.max.receive.size
        raw.send_bytes(struct.pack(">i", 524289) + b"\0" * 1024)
        assert raw.read_frame() is None
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        assert _authenticate(raw, "alice", "alice-secret") == 0


def test_thousands_of_failed_logins_leave_the_broker_serving(sasl_plaintext):
    """1,000 wrong passwords on 50 connections at a time: each is refused, and a client meanwhile is served."""
    topic = f"storm-{uuid.uuid4().hex[:6]}"
    sasl_plaintext.state.create_topic(topic, 1)
    host, port = sasl_plaintext.bootstrap_servers.rsplit(":", 1)
    handshake = SaslHandshakeRequest[1](mechanism="PLAIN")
    handshake.with_header(correlation_id=1, client_id="storm")
    wrong = SaslAuthenticateRequest[2](auth_bytes=_plain_token("alice", "wrong"))
    wrong.with_header(correlation_id=2, client_id="storm")
    login = handshake.encode(header=True, framed=True) + wrong.encode(header=True, framed=True)
    producer = Producer({**sasl_plaintext.client_config(user="alice"), "linger.ms": 0})
    refused = 0
    for wave in range(20):
        sockets = [socket.create_connection((host, int(port)), timeout=TIMEOUT_S) for _ in range(50)]
        try:
            for sock in sockets:
                sock.sendall(login)
            for sock in sockets:
                received = b""
                while chunk := sock.recv(1 << 16):
                    received += chunk
                refused += b"Invalid username or password" in received
        finally:
            for sock in sockets:
                sock.close()
        producer.produce(topic, str(wave).encode())
        assert producer.flush(TIMEOUT_S) == 0
    assert refused == 1000
    assert [r.value for r in sasl_plaintext.state.records(topic, 0)] == [str(w).encode() for w in range(20)]


def test_a_tls_handshake_that_never_finishes_is_closed(tmp_path, monkeypatch):
    from minikafka.broker.network import socket_server

    monkeypatch.setattr(socket_server, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)
    with minikafka.Broker(security="SSL", in_process=True, data_dir=tmp_path / "d",
                          log_path=tmp_path / "broker.log") as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
            sock.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and then nothing
            started = time.monotonic()
            assert sock.recv(1 << 16) == b""
            assert time.monotonic() - started < TIMEOUT_S
        assert "no TLS handshake within 0.5 s" in broker.log_path.read_text()
        assert _confluent_round_trip(broker.client_config(), f"t-{uuid.uuid4().hex[:6]}", _values(2)) == _values(2)


def test_acl_apis_without_an_authorizer_answer_security_disabled(broker):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    filter_ = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                               AclPermissionType.ANY)
    for future in (*admin.create_acls([binding]).values(), *admin.delete_acls([filter_]).values()):
        with pytest.raises(KafkaException) as raised:
            future.result(TIMEOUT_S)
        error = raised.value.args[0]
        assert (error.name(), error.str()) == ("SECURITY_DISABLED", "No Authorizer is configured.")
    # librdkafka drops DescribeAcls' top-level error (its result is an empty list): asked directly.
    with quiet_schema_loading():
        from kafka.protocol.admin import DescribeAclsRequest
    with RawConnection(broker.bootstrap_servers) as raw:
        described = raw.request(DescribeAclsRequest[3](
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (described.error_code, described.error_message) == (54, "No Authorizer is configured.")


@pytest.mark.parametrize("secured", ["SASL_PLAINTEXT", "SASL_SSL"], indirect=True)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_scram_with_each_client(secured, client, mechanism):
    topic = f"scram-{client}-{uuid.uuid4().hex[:6]}"
    config = secured.client_config(user="alice", client=client, mechanism=mechanism)
    assert ROUND_TRIPS[client](config, topic, _values(5)) == _values(5)


def test_scram_refusals_say_what_kafka_says_for_a_wrong_password_and_an_unknown_user(sasl_plaintext):
    for user, password in (("alice", "wrong"), ("mallory", "whatever")):
        config = {**sasl_plaintext.client_config(user="alice", mechanism="SCRAM-SHA-512"), "sasl.username": user,
                  "sasl.password": password}
        errors: list[str] = []
        producer = Producer({**config, "error_cb": errors_into(errors), "message.timeout.ms": 2000})
        producer.produce("never-written", b"x")
        producer.flush(10)
        assert any("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                   "SCRAM-SHA-512" in e for e in errors), errors


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_oauthbearer_unsecured_tokens_from_each_client(sasl_plaintext, client):
    """librdkafka makes an unsecured token for `sasl.oauthbearer.config=principal=...`, kafka-python and aiokafka
    take the token provider client_config gives them; Kafka's default validator accepts each: the principal is the
    token's subject."""
    topic = f"oauth-{client}-{uuid.uuid4().hex[:6]}"
    config = sasl_plaintext.client_config(user="carol", client=client, mechanism="OAUTHBEARER")
    assert ROUND_TRIPS[client](config, topic, _values(3)) == _values(3)


def test_an_expired_oauthbearer_token_is_refused_with_kafkas_json_status(sasl_plaintext):
    import base64
    import json

    def part(value: dict) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    now = int(time.time())
    token = part({"alg": "none"}) + b"." + part({"sub": "carol", "iat": now - 120, "exp": now - 60}) + b"."
    with RawConnection(sasl_plaintext.bootstrap_servers) as raw:
        assert raw.request(SaslHandshakeRequest[1](mechanism="OAUTHBEARER")).error_code == 0
        challenge = raw.request(SaslAuthenticateRequest[2](auth_bytes=b"n,,\x01auth=Bearer " + token + b"\x01\x01"))
        assert challenge.error_code == 0 and json.loads(challenge.auth_bytes)["status"] == "invalid_token"
        refused = raw.request(SaslAuthenticateRequest[2](auth_bytes=b"\x01"))
        assert refused.error_code == 58
        assert raw.read_frame() is None
