"""`minikafka acls` against a real broker with Kafka's StandardAuthorizer, as a subprocess with --command-config:
kafka-acls.sh's output for add, list and remove, the --producer / --consumer expansions, PREFIXED patterns and the
MATCH filter, the confirmation --remove asks for, and the one-line failures of a non-admin user and of a broker
without an authorizer. Each test names resources of its own, since ACLs are the broker's, not a test's."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

import minikafka

TIMEOUT_S = 60
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def properties(broker: minikafka.Broker, directory: Path, user: str) -> Path:
    path = directory / f"{user}.properties"
    path.write_text(broker.client_config(user=user, client="java", mechanism="PLAIN"))
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("acls")
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS, config=AUTHORIZER) as broker:
        yield {"broker": broker, "admin": properties(broker, directory, "admin"),
               "alice": properties(broker, directory, "alice")}


def acls(secured, *args: str, user: str = "admin", stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", "acls", *args, "--bootstrap-server",
                           secured["broker"].bootstrap_servers, "--command-config", str(secured[user])],
                          input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def topic(name: str, pattern: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType=TOPIC, name={name}, patternType={pattern})"


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def test_add_list_and_remove_print_kafka_s_layout(secured):
    added = ok(acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                    "Write", "--topic", "rt-orders"))
    assert added == (f"Adding ACLs for resource `{topic('rt-orders')}`: \n"
                     f" \t{entry('User:alice', 'READ')}\n"
                     f"\t{entry('User:alice', 'WRITE')}\n\n")
    ok(acls(secured, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--topic", "rt-orders"))
    listing = (f"Current ACLs for resource `{topic('rt-orders')}`:\n"
               f"\t{entry('User:alice', 'READ')}\n"
               f"\t{entry('User:alice', 'WRITE')}\n"
               f"\t{entry('User:bob', 'ALL', 'DENY', '10.0.0.1')}\n\n")
    assert ok(acls(secured, "--list", "--topic", "rt-orders")) == listing

    assert ok(acls(secured, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
                   "--topic", "rt-orders")) == ""
    assert entry("User:alice", "WRITE") not in ok(acls(secured, "--list", "--topic", "rt-orders"))
    assert ok(acls(secured, "--remove", "--force", "--topic", "rt-orders")) == ""
    assert ok(acls(secured, "--list", "--topic", "rt-orders")) == ""


def test_remove_asks_before_deleting(secured):
    ok(acls(secured, "--add", "--allow-principal", "User:alice", "--group", "ask-group"))
    group = "ResourcePattern(resourceType=GROUP, name=ask-group, patternType=LITERAL)"
    question = f"Are you sure you want to delete all ACLs for resource filter `{group}`? (y/n)\n"
    assert ok(acls(secured, "--remove", "--group", "ask-group", stdin="n\n")) == question
    assert entry("User:alice", "ALL") in ok(acls(secured, "--list", "--group", "ask-group"))
    one = (f"Are you sure you want to remove ACLs: \n \t{entry('User:alice', 'ALL')}\n"
           f" from resource filter `{group}`? (y/n)\n")
    assert ok(acls(secured, "--remove", "--group", "ask-group", "--allow-principal", "User:alice",
                   stdin="y\n")) == one
    assert ok(acls(secured, "--list", "--group", "ask-group")) == ""


def test_producer_and_consumer_expand_to_the_acls_their_roles_need(secured):
    ok(acls(secured, "--add", "--allow-principal", "User:bob", "--producer", "--idempotent", "--topic", "role-t",
            "--transactional-id", "role-tx"))
    ok(acls(secured, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "role-t", "--group",
            "role-g"))
    listing = ok(acls(secured, "--list", "--topic", "role-t", "--group", "role-g", "--transactional-id", "role-tx",
                      "--cluster"))
    assert (f"Current ACLs for resource `{topic('role-t')}`:\n"
            f"\t{entry('User:alice', 'READ')}\n\t{entry('User:alice', 'DESCRIBE')}\n"
            f"\t{entry('User:bob', 'WRITE')}\n\t{entry('User:bob', 'CREATE')}\n"
            f"\t{entry('User:bob', 'DESCRIBE')}\n\n") in listing
    assert (f"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=role-g, patternType=LITERAL)`:\n"
            f"\t{entry('User:alice', 'READ')}\n\n") in listing
    assert (f"resourceType=TRANSACTIONAL_ID, name=role-tx, patternType=LITERAL)`:\n"
            f"\t{entry('User:bob', 'WRITE')}\n\t{entry('User:bob', 'DESCRIBE')}\n\n") in listing
    assert f"name=kafka-cluster, patternType=LITERAL)`:\n\t{entry('User:bob', 'IDEMPOTENT_WRITE')}\n" in listing

    # What the ACLs are for: bob's idempotent producer writes (creating the topic), a user without them cannot.
    config = secured["broker"].client_config(user="bob", client="confluent")
    producer = Producer({**config, "enable.idempotence": True, "message.timeout.ms": 10000})
    producer.produce("role-t", b"v")
    assert producer.flush(TIMEOUT_S) == 0
    denied = Producer({**secured["broker"].client_config(user="alice", client="confluent"),
                       "message.timeout.ms": 3000})
    errors = []
    denied.produce("role-t", b"v", on_delivery=lambda err, _msg: errors.append(err))
    denied.flush(TIMEOUT_S)
    assert [e.name() for e in errors] == ["TOPIC_AUTHORIZATION_FAILED"]


def test_prefixed_patterns_and_the_match_filter(secured):
    ok(acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "pfx-",
            "--resource-pattern-type", "prefixed"))
    prefixed = f"Current ACLs for resource `{topic('pfx-', 'PREFIXED')}`:\n\t{entry('User:alice', 'DESCRIBE')}\n\n"
    assert ok(acls(secured, "--list", "--topic", "pfx-orders", "--resource-pattern-type", "match")) == prefixed
    assert ok(acls(secured, "--list", "--topic", "pfx-", "--resource-pattern-type", "any")) == prefixed
    assert ok(acls(secured, "--list", "--topic", "pfx-")) == ""  # LITERAL by default
    refused = acls(secured, "--add", "--allow-principal", "User:alice", "--topic", "pfx-", "--resource-pattern-type",
                   "match")
    assert (refused.returncode, refused.stderr) == (
        1, "Error: A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls.\n")
    assert ok(acls(secured, "--remove", "--force", "--topic", "pfx-", "--resource-pattern-type", "prefixed")) == ""
    assert ok(acls(secured, "--list", "--topic", "pfx-orders", "--resource-pattern-type", "match")) == ""


def test_list_by_principal(secured):
    ok(acls(secured, "--add", "--allow-principal", "User:carol", "--allow-principal", "User:dan", "--operation",
            "Read", "--topic", "by-principal"))
    listing = ok(acls(secured, "--list", "--principal", "User:carol"))
    assert listing == (f"ACLs for principal `User:carol`\nCurrent ACLs for resource `{topic('by-principal')}`:\n"
                       f"\t{entry('User:carol', 'READ')}\n\n")


def test_a_user_without_cluster_alter_cannot_change_or_list_acls(secured):
    for args in (["--list"], ["--add", "--allow-principal", "User:alice", "--topic", "not-mine"],
                 ["--remove", "--force", "--topic", "rt-anything"]):
        proc = acls(secured, *args, user="alice")
        assert proc.returncode == 1
        assert proc.stderr == ("Error while executing ACL command: CLUSTER_AUTHORIZATION_FAILED: Cluster "
                               "authorization failed.\n")
    assert ok(acls(secured, "--list", "--topic", "not-mine")) == ""


def test_without_an_authorizer_every_action_fails_with_security_disabled(tmp_path):
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS) as broker:
        setup = {"broker": broker, "admin": properties(broker, tmp_path, "admin")}
        for args in (["--list"], ["--add", "--allow-principal", "User:alice", "--topic", "t"],
                     ["--remove", "--force", "--topic", "t"]):
            proc = acls(setup, *args)
            assert proc.returncode == 1
            assert proc.stderr == "Error while executing ACL command: SECURITY_DISABLED: No Authorizer is configured.\n"


def test_an_unreachable_broker_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "minikafka", "acls", "--list", "--bootstrap-server",
                           "127.0.0.1:1"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error while executing ACL command: ") and proc.stderr.count("\n") == 1

