"""`minikafka.Broker` as a user writes it: start, use with real clients, restart, crash, clean up."""
from __future__ import annotations

import os
import shutil
import signal

import pytest
from kafka import KafkaProducer

import minikafka
from minikafka.control_client import ControlClient
from minikafka.subprocess_runner import BrokerStartError
from tests.helpers import consume_values, held_free_port, wait_until


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        return [producer.send(topic, v, partition=partition).get(timeout=20).offset for v in values]
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str, partition: int = 0, expected: int = 1) -> list[bytes]:
    return consume_values(bootstrap, topic, expected, partition=partition)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_with_block_starts_a_real_broker_and_removes_everything_after():
    with minikafka.Broker() as broker:
        assert broker.running and broker.pid is not None
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        assert produce(broker.bootstrap_servers, "orders", [b"a", b"b"]) == [0, 1]
        assert consume_all(broker.bootstrap_servers, "orders", expected=2) == [b"a", b"b"]
        assert (broker.data_dir / "orders-0").is_dir()
        assert "started" in broker.log_path.read_text()
        pid, data_dir = broker.pid, broker.data_dir
    assert not broker.running
    assert not process_alive(pid)
    assert not data_dir.exists()


def test_broker_is_stopped_and_cleaned_when_the_body_raises():
    with pytest.raises(RuntimeError, match="test body failed"):
        with minikafka.Broker() as broker:
            pid, data_dir = broker.pid, broker.data_dir
            raise RuntimeError("test body failed")
    assert not process_alive(pid)
    assert not data_dir.exists()


def test_keep_data_leaves_kafka_layout_to_inspect():
    with minikafka.Broker(keep_data=True) as broker:
        produce(broker.bootstrap_servers, "kept", [b"x"])
    try:
        assert (broker.data_dir / "kept-0" / "00000000000000000000.log").stat().st_size > 0
        assert (broker.data_dir / "meta.properties").exists()
    finally:
        shutil.rmtree(broker.data_dir.parent)


def test_given_data_dir_and_port_are_used_and_kept(tmp_path):
    data = tmp_path / "mydata"
    with held_free_port() as port, minikafka.Broker(port=port, data_dir=data) as broker:
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        produce(broker.bootstrap_servers, "t", [b"1"])
    assert (data / "t-0").is_dir()
    assert broker.log_path == tmp_path / "mydata.log" and broker.log_path.exists()


def test_clean_restart_keeps_data_and_port():
    with minikafka.Broker() as broker:
        port = broker.port
        produce(broker.bootstrap_servers, "t", [b"before"])
        old_pid = broker.pid
        broker.restart()
        assert broker.port == port and broker.pid != old_pid
        assert produce(broker.bootstrap_servers, "t", [b"after"]) == [1]
        assert consume_all(broker.bootstrap_servers, "t", expected=2) == [b"before", b"after"]


def test_kill_is_a_crash_and_acknowledged_records_survive_it():
    with minikafka.Broker() as broker:
        produce(broker.bootstrap_servers, "t", [b"v%d" % i for i in range(50)])
        pid = broker.pid
        broker.kill()
        assert not process_alive(pid) and not broker.running
        with pytest.raises(RuntimeError, match="not running"):
            _ = broker.bootstrap_servers
        broker.start()
        values = consume_all(broker.bootstrap_servers, "t", expected=50)
        assert values == [b"v%d" % i for i in range(50)]


def test_restart_with_kill_flag_and_stop_then_start():
    with minikafka.Broker() as broker:
        produce(broker.bootstrap_servers, "t", [b"1"])
        broker.restart(kill=True)
        broker.stop()
        assert not broker.running
        broker.start()
        assert consume_all(broker.bootstrap_servers, "t") == [b"1"]


def test_config_overrides_by_kafka_property_names():
    with minikafka.Broker(config={"num.partitions": 3, "auto.create.topics.enable": True}) as broker:
        produce(broker.bootstrap_servers, "auto", [b"x"])
        assert [p.partition for p in broker.state.partitions("auto")] == [0, 1, 2]


def test_properties_the_handle_owns_are_refused_in_config():
    with pytest.raises(ValueError, match="listeners"):
        minikafka.Broker(config={"listeners": "PLAINTEXT://127.0.0.1:9"})


def test_broker_that_cannot_start_raises_with_its_log(tmp_path):
    with pytest.raises(BrokerStartError, match="num.partitions") as info:
        with minikafka.Broker(data_dir=tmp_path / "d", config={"num.partitions": "lots"}):
            pass
    assert str(tmp_path / "d.log") in str(info.value)


def test_sigterm_from_outside_is_seen_by_the_handle():
    with minikafka.Broker() as broker:
        os.kill(broker.pid, signal.SIGTERM)
        wait_until(lambda: not broker.running, message="the broker to exit on SIGTERM")
        broker.start()
        assert produce(broker.bootstrap_servers, "t", [b"x"]) == [0]


def test_in_process_broker_serves_restarts_and_survives_a_kill():
    with minikafka.Broker(in_process=True) as broker:
        assert broker.pid is None and broker.running
        produce(broker.bootstrap_servers, "t", [b"a"])
        broker.restart()
        assert produce(broker.bootstrap_servers, "t", [b"b"]) == [1]
        assert consume_all(broker.bootstrap_servers, "t", expected=2) == [b"a", b"b"]
        produce(broker.bootstrap_servers, "t", [b"c"])
        broker.kill()  # no flush, no checkpoint: the one written by the clean restart (after "a") still stands
        assert not broker.running
        assert "t 0 1" in (broker.data_dir / "recovery-point-offset-checkpoint").read_text()
        broker.start()
        assert consume_all(broker.bootstrap_servers, "t", expected=3) == [b"a", b"b", b"c"]
        assert produce(broker.bootstrap_servers, "t", [b"d"]) == [3]
        assert "crashed on request" in broker.log_path.read_text()
    assert not broker.running


def test_two_brokers_side_by_side_are_independent():
    with minikafka.Broker() as one, minikafka.Broker(in_process=True) as two:
        assert one.port != two.port
        produce(one.bootstrap_servers, "only-on-one", [b"1"])
        assert "only-on-one" in one.state.topics()
        assert "only-on-one" not in two.state.topics()


def test_cluster_of_one_has_the_cluster_interface():
    with minikafka.Cluster(brokers=1) as cluster:
        produce(cluster.bootstrap_servers, "t", [b"x"])
        leader = cluster.leader_of("t", 0)
        assert leader is cluster.broker(1) and leader.node_id == 1
        assert cluster.state.partition("t", 0).isr == [1]
        data_dir = cluster.data_dir
    assert not data_dir.exists()


def test_pause_freezes_the_process_until_resume():
    with minikafka.Broker() as broker:
        produce(broker.bootstrap_servers, "t", [b"before"])
        broker.pause()
        assert broker.paused and broker.running
        with pytest.raises(TimeoutError):
            ControlClient(broker.bootstrap_servers, timeout_s=0.5).call("describe", topics=[])
        broker.resume()
        assert not broker.paused
        assert produce(broker.bootstrap_servers, "t", [b"after"]) == [1]
        broker.pause()
        assert broker.stop() == 0  # a paused broker still stops cleanly
        assert not broker.paused


def test_pause_of_an_in_process_broker_says_why_not():
    with minikafka.Broker(in_process=True) as broker:
        with pytest.raises(RuntimeError, match="in-process"):
            broker.pause()


def test_control_shutdown_stops_an_in_process_broker_but_not_the_test_process():
    with minikafka.Broker(in_process=True) as broker:
        ControlClient(broker.bootstrap_servers).call("shutdown")
        wait_until(lambda: not broker.running, message="the in-process broker to stop")
    # Reaching this line is the check: a SIGTERM would have ended the test process.
