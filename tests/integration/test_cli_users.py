"""`minikafka users` against a real broker, as a subprocess with --command-config: kafka-configs.sh's lines for
users' SCRAM credentials and quotas, a credential added by the command that a client then logs in with (and cannot
once it is deleted), and the one-line failures. Each test alters users of its own."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

import minikafka

TIMEOUT_S = 60
LOGIN_TIMEOUT_S = 10
ATTEMPT_S = 0.5
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    config = tmp_path_factory.mktemp("users") / "admin.properties"
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS) as broker:
        config.write_text(broker.client_config(user="admin", client="java", mechanism="PLAIN"))
        yield {"broker": broker, "admin": config}


def users(secured, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", "users", *args, "--bootstrap-server",
                           secured["broker"].bootstrap_servers, "--command-config", str(secured["admin"])],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def failure(proc: subprocess.CompletedProcess) -> str:
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    return proc.stderr


def logs_in(secured, user: str, password: str) -> bool:
    """Whether a confluent-kafka client authenticates as `user` with SCRAM-SHA-512: its metadata, or librdkafka's
    _AUTHENTICATION error (which it otherwise retries until the request times out)."""
    config = secured["broker"].client_config(user="alice", client="confluent", mechanism="SCRAM-SHA-512")
    refusals: list[KafkaError] = []
    admin = AdminClient({**config, "sasl.username": user, "sasl.password": password, "error_cb": refusals.append})
    deadline = time.monotonic() + LOGIN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=ATTEMPT_S)
            return True
        except KafkaException:
            admin.poll(0)  # serves error_cb
        if any(error.code() == KafkaError._AUTHENTICATION for error in refusals):
            return False
    raise AssertionError(f"{user} was neither logged in nor refused within {LOGIN_TIMEOUT_S} s")


def test_describe_prints_each_user_s_scram_credentials(secured):
    line = ("SCRAM credential configs for user-principal '{}' are SCRAM-SHA-256=iterations=4096, "
            "SCRAM-SHA-512=iterations=4096\n")
    assert ok(users(secured, "--describe", "--user", "alice")) == line.format("alice")
    every = ok(users(secured, "--describe")).splitlines(keepends=True)
    assert {line.format(user) for user in ("admin", "alice", "bob")} <= set(every)
    assert ok(users(secured, "--describe", "--entity-type", "users", "--entity-name", "nobody")) == ""


def test_a_credential_added_is_one_a_client_logs_in_with_until_deleted(secured):
    added = users(secured, "--alter", "--user", "carol", "--add-config",
                  "SCRAM-SHA-512=[iterations=8192,password=carol-secret]")
    assert ok(added) == "Completed updating config for user carol.\n"
    assert ok(users(secured, "--describe", "--user", "carol")) == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192\n")
    assert logs_in(secured, "carol", "carol-secret")
    assert not logs_in(secured, "carol", "wrong")

    assert ok(users(secured, "--alter", "--user", "carol", "--delete-config", "SCRAM-SHA-512")) == (
        "Completed updating config for user carol.\n")
    assert ok(users(secured, "--describe", "--user", "carol")) == ""
    assert not logs_in(secured, "carol", "carol-secret")


def test_quotas_are_described_before_credentials_as_java_prints_doubles(secured):
    altered = users(secured, "--alter", "--user", "bob", "--add-config",
                    "producer_byte_rate=10485760,consumer_byte_rate=1024")
    assert ok(altered) == "Completed updating config for user bob.\n"
    assert ok(users(secured, "--describe", "--user", "bob")) == (
        "Quota configs for user-principal 'bob' are consumer_byte_rate=1024.0, producer_byte_rate=1.048576E7\n"
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=4096\n")
    assert failure(users(secured, "--alter", "--user", "bob", "--delete-config", "request_percentage")) == (
        "Error: Invalid config(s): request_percentage\n")
    ok(users(secured, "--alter", "--user", "bob", "--delete-config", "producer_byte_rate,consumer_byte_rate"))
    assert not ok(users(secured, "--describe", "--user", "bob")).startswith("Quota configs")


@pytest.mark.parametrize("args, error", [
    (["--delete-config", "SCRAM-SHA-256"],
     "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"),
    (["--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"],
     "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
    (["--add-config", "SCRAM-SHA-256=x"], "Invalid credential property SCRAM_SHA_256=x"),
    (["--add-config", "retention.ms=1"], "Only quota and SCRAM credential configs can be added for 'users' using "
                                         "--bootstrap-server. Unexpected config names: retention.ms"),
    (["--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1"],
     "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."),
])
def test_a_refused_alter_is_one_line(secured, args, error):
    assert failure(users(secured, "--alter", "--user", "erin", *args)) == f"Error: {error}\n"
