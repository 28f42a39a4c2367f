"""`minikafka acls` and `minikafka users` without a broker: AclCommand's expansion of the options into resources and
entries and its usage messages, ConfigCommand's --add-config parsing, and Java's printing of a quota's double."""
from __future__ import annotations

import pytest

from minikafka.broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from minikafka.cli import build_parser, main
from minikafka.cli_acls import Entry, Pattern, _cluster, _resource_acls
from minikafka.cli_common import CommandError
from minikafka.cli_users import _configs_to_add, java_double

UNREACHABLE = ["--bootstrap-server", "127.0.0.1:1"]


def resource_acls(*args: str) -> dict[Pattern, set[Entry]]:
    return _resource_acls(build_parser().parse_args(["acls", *args]))


def allowed(principal: str, *operations: AclOperation, host: str = "*") -> set[Entry]:
    return {Entry(principal, host, operation, AclPermissionType.ALLOW) for operation in operations}


def test_every_principal_gets_every_operation_from_every_host_on_every_resource():
    acls = resource_acls("--add", "--topic", "t", "--group", "g", "--allow-principal", "User:a", "--allow-principal",
                         "User:b", "--allow-host", "h1", "--allow-host", "h2", "--operation", "Read",
                         "--deny-principal", "User:c")
    expected = {Entry(p, h, AclOperation.READ, AclPermissionType.ALLOW) for p in ("User:a", "User:b")
                for h in ("h1", "h2")} | {Entry("User:c", "*", AclOperation.READ, AclPermissionType.DENY)}
    topic, group = Pattern(ResourceType.TOPIC, "t", PatternType.LITERAL), Pattern(ResourceType.GROUP, "g",
                                                                                  PatternType.LITERAL)
    assert acls == {topic: expected, group: expected}


def test_producer_and_consumer_together_merge_on_the_topics():
    acls = resource_acls("--add", "--producer", "--consumer", "--idempotent", "--topic", "t", "--group", "g",
                         "--transactional-id", "x", "--allow-principal", "User:a", "--resource-pattern-type",
                         "prefixed")
    op = AclOperation
    assert acls == {
        Pattern(ResourceType.TOPIC, "t", PatternType.PREFIXED): allowed("User:a", op.WRITE, op.DESCRIBE, op.CREATE,
                                                                        op.READ),
        Pattern(ResourceType.TRANSACTIONAL_ID, "x", PatternType.PREFIXED): allowed("User:a", op.WRITE, op.DESCRIBE),
        Pattern(ResourceType.GROUP, "g", PatternType.PREFIXED): allowed("User:a", op.READ),
        _cluster(): allowed("User:a", op.IDEMPOTENT_WRITE)}  # the cluster is LITERAL whatever the pattern type


def test_removing_without_principals_is_every_acl_of_each_resource():
    assert resource_acls("--remove", "--cluster", "--user-principal", "User:u", "--operation", "Alter") == {
        _cluster(): set(), Pattern(ResourceType.USER, "User:u", PatternType.LITERAL): set()}


@pytest.mark.parametrize("args, message", [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal when trying to add "
                                "ACLs."),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource: --topic <topic> or --cluster "
                                               "or --group <group> or --delegation-token <Delegation Token ID>"),
    (["--add", "--allow-principal", "a", "--topic", "t"],
     "expected a string in format principalType:principalName but got a"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations [ALL, READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"],
     "ResourceType TOPIC only supports operations [ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, "
     "DESCRIBE_CONFIGS, ALTER_CONFIGS]"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"],
     "A '--resource-pattern-type' value of 'ANY' is not valid when adding acls."),
    (["--list", "--allow-principal", "User:a"], "Option \"[list]\" can't be used with option \"[allow-principal]\""),
    (["--add", "--producer", "--topic", "t", "--operation", "Read"],
     "Option \"[producer]\" can't be used with option \"[operation]\""),
    (["--add", "--producer", "--group", "g"], "With --producer you must specify a --topic"),
    (["--add", "--idempotent", "--topic", "t"], "The --idempotent option is only available if --producer is set"),
    (["--remove", "--principal", "User:a"], "The --principal option is only available if --list is set"),
    (["--add", "--consumer", "--topic", "t"], "With --consumer you must specify a --topic and a --group and no "
                                              "--cluster or --transactional-id option should be specified."),
])
def test_what_acl_command_refuses_is_refused_before_the_broker_is_asked(capsys, args, message):
    assert main(["acls", *args, *UNREACHABLE]) == 1
    assert capsys.readouterr() == ("", f"Error: {message}\n")


def test_add_config_keeps_commas_inside_brackets():
    args = build_parser().parse_args(["users", "--alter", "--user", "u", "--add-config",
                                      "SCRAM-SHA-512=[iterations=8192,password=a,b=c] , producer_byte_rate = 10,"])
    assert _configs_to_add(args) == {"SCRAM-SHA-512": "iterations=8192,password=a,b=c", "producer_byte_rate": "10"}


@pytest.mark.parametrize("text, message", [
    ("a", "Invalid entity config: all configs to be added must be in the format \"key=val\"."),
    ("a b=1", "Invalid character found for config key: a b"),
])
def test_add_config_refuses_what_config_command_refuses(text, message):
    args = build_parser().parse_args(["users", "--alter", "--user", "u", "--add-config", text])
    with pytest.raises(CommandError, match=message):
        _configs_to_add(args)


@pytest.mark.parametrize("value, text", [
    (1024.0, "1024.0"), (0.5, "0.5"), (0.0, "0.0"), (9999999.0, "9999999.0"), (1e7, "1.0E7"),
    (10485760.0, "1.048576E7"), (2.5e-4, "2.5E-4"), (-1.5e10, "-1.5E10"), (0.001, "0.001"),
])
def test_quota_values_print_as_java_prints_a_double(value, text):
    assert java_double(value) == text
