"""`minikafka acls --add|--remove|--list`: kafka-acls.sh's options, behaviour and output, over Kafka's ACL APIs
(CreateAcls, DeleteAcls, DescribeAcls).

Resources are named by --topic, --group, --cluster, --transactional-id, --delegation-token and --user-principal
(each repeatable but --cluster) with --resource-pattern-type: LITERAL (the default) or PREFIXED, and for --list and
--remove also the filters ANY (any pattern type, this exact name) and MATCH (every pattern that applies to the name).
The entries are every --allow-principal / --deny-principal with every --operation (All by default) from every
--allow-host / --deny-host (`*` by default), on every resource named. --producer and --consumer stand for the ACLs
those roles need, as AclCommand expands them: WRITE, DESCRIBE and CREATE on the topics and WRITE, DESCRIBE on the
transactional ids (with --idempotent, IDEMPOTENT_WRITE on the cluster); READ, DESCRIBE on the topics and READ on the
groups.

--remove without principals deletes every ACL of each resource (--operation does not narrow it, as in Kafka), each
after asking "Are you sure you want to ...? (y/n)" on stdin unless --force. The output is Kafka's: "Adding ACLs for
resource `ResourcePattern(...)`:", "Current ACLs for resource `...`:", each entry as Kafka's AccessControlEntry prints
it; resources and entries come sorted, where Kafka prints them in hash order. A failure once the broker is asked is
one line on stderr, "Error while executing ACL command: <Kafka's error name>: <the broker's message>" (Kafka adds a
stack trace); a wrong combination of options is "Error: <AclCommand's usage message>".

The requests go over kafka-python's admin client, but are built and read here: its create_acls and delete_acls keep
no message of the broker's, and its describe_acls fails on operations it does not know.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from minikafka.cli_common import BrokerError, CommandError, add_bootstrap, admin_client, error_line, run_guarded

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

    from minikafka.broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

CLIENT_ID = "minikafka-acls"
FAILURE = "Error while executing ACL command: "
PATTERN_TYPES = ("LITERAL", "PREFIXED", "ANY", "MATCH")
# The first ACL API versions that know USER resources (KIP-373's delegation tokens for other users).
USER_RESOURCE_VERSION = 3
# The operations of the --producer and --consumer roles by resource type, in Kafka's names (the ACL vocabulary is
# imported only where used: it would slow every command's start).
PRODUCER_OPERATIONS = {"TOPIC": ("WRITE", "DESCRIBE", "CREATE"), "TRANSACTIONAL_ID": ("WRITE", "DESCRIBE")}
CONSUMER_OPERATIONS = {"TOPIC": ("READ", "DESCRIBE"), "GROUP": ("READ",)}
# What AclCommand's checkArgs refuses beside --list, and beside --producer or --consumer (which infer operations).
NOT_WITH_LIST = ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal")
NOT_WITH_A_ROLE = ("operation", "deny_principal", "deny_host")


class Pattern(NamedTuple):
    """A resource pattern, or a filter of them (pattern type ANY or MATCH; no name: any), as Kafka prints both."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
                f"patternType={self.pattern_type.name})")


class Entry(NamedTuple):
    """An access control entry, as Kafka's AccessControlEntry prints it."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")



def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acls", help="add, remove and list ACLs (like kafka-acls.sh)",
                       description="Add, remove and list ACLs with kafka-acls.sh's options and output. The broker "
                                   "needs an authorizer (authorizer.class.name), and the client the ALTER (add, "
                                   "remove) or DESCRIBE (list) operation on the cluster, as a super user has.")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs (of the resources named, or all)")
    p.add_argument("--topic", "-t", action="append", default=[], help="a topic ('*': every topic) (repeatable)")
    p.add_argument("--group", action="append", default=[], help="a consumer group ('*': every group) (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument("--transactional-id", action="append", default=[],
                   help="a transactional id ('*': every one) (repeatable)")
    p.add_argument("--delegation-token", action="append", default=[],
                   help="a delegation token id ('*': every token) (repeatable)")
    p.add_argument("--user-principal", action="append", default=[],
                   help="a user as a resource, for CreateTokens or DescribeTokens (repeatable)")
    p.add_argument("--resource-pattern-type", type=_pattern_type, default="LITERAL",
                   metavar="LITERAL|PREFIXED|ANY|MATCH",
                   help="how the resource names match: LITERAL (default) or PREFIXED; to list or remove, also ANY "
                        "(any pattern type, this exact name) or MATCH (every pattern that applies to the name)")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="a principal to allow, e.g. User:alice, or User:* for every user (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="a principal to deny; a DENY wins over any ALLOW (repeatable)")
    p.add_argument("--allow-host", action="append", default=[],
                   help="a host the allowed principals may connect from (default: *) (repeatable)")
    p.add_argument("--deny-host", action="append", default=[],
                   help="a host the denied principals are denied from (default: *) (repeatable)")
    p.add_argument("--operation", action="append",
                   help="an operation to allow or deny (default All): Read, Write, Create, Delete, Alter, "
                        "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, "
                        "DescribeTokens, All (repeatable)")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                   help="with --list: only this principal's ACLs (repeatable)")
    p.add_argument("--producer", action="store_true",
                   help="the ACLs of a producer: WRITE, DESCRIBE and CREATE on the topics, WRITE and DESCRIBE on "
                        "the transactional ids")
    p.add_argument("--consumer", action="store_true",
                   help="the ACLs of a consumer: READ and DESCRIBE on the topics, READ on the groups")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster too")
    p.add_argument("--force", action="store_true", help="remove without asking")


def _pattern_type(text: str) -> str:
    if text.strip().upper() not in PATTERN_TYPES:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {text}")
    return text.strip().upper()


def run(args: argparse.Namespace) -> int:
    return run_guarded(_run, args)


def _run(args: argparse.Namespace) -> int:
    _check_args(args)
    if args.add:
        return _add(args)
    if args.remove:
        return _remove(args)
    return _list(args)


def _check_args(args: argparse.Namespace) -> None:
    """AclCommand's checkArgs: the combinations of options it refuses, with its messages."""
    if args.list:
        _refuse_beside("list", args, NOT_WITH_LIST)
    for role in ("producer", "consumer"):
        if getattr(args, role):
            _refuse_beside(role, args, NOT_WITH_A_ROLE)
    if args.principal and not args.list:
        raise CommandError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise CommandError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise CommandError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise CommandError("With --consumer you must specify a --topic and a --group and no --cluster or "
                           "--transactional-id option should be specified.")


def _refuse_beside(used: str, args: argparse.Namespace, options: Iterable[str]) -> None:
    for option in options:
        if getattr(args, option):
            raise CommandError(f"Option \"[{used}]\" can't be used with option \"[{option.replace('_', '-')}]\"")


def _patterns(args: argparse.Namespace, required: bool) -> list[Pattern]:
    """The resources (or filters) named, as AclCommand's getResourceFilter: the cluster only with LITERAL."""
    from minikafka.broker.security.acl import PatternType, ResourceType

    kind = PatternType[args.resource_pattern_type]
    patterns = [Pattern(ResourceType.TOPIC, topic.strip(), kind) for topic in args.topic]
    if kind == PatternType.LITERAL and (args.cluster or args.idempotent):
        patterns.append(_cluster())
    patterns += [Pattern(ResourceType.GROUP, group.strip(), kind) for group in args.group]
    patterns += [Pattern(ResourceType.TRANSACTIONAL_ID, txn_id, kind) for txn_id in args.transactional_id]
    patterns += [Pattern(ResourceType.DELEGATION_TOKEN, token.strip(), kind) for token in args.delegation_token]
    patterns += [Pattern(ResourceType.USER, user.strip(), kind) for user in args.user_principal]
    if required and not patterns:
        raise CommandError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                           "or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(patterns))


def _principals(values: Iterable[str]) -> list[str]:
    """Principals as Kafka's SecurityUtils.parseKafkaPrincipal takes them: TYPE:NAME."""
    principals = []
    for value in values:
        principal = value.strip()
        if ":" not in principal:
            raise CommandError(f"expected a string in format principalType:principalName but got {principal}")
        principals.append(principal)
    return list(dict.fromkeys(principals))


def _operation(name: str) -> AclOperation:
    """Kafka's operation names (Read, IdempotentWrite, READ, ...); one it does not know is UNKNOWN, which no resource
    type supports, as in Kafka."""
    from minikafka.broker.security.acl import AclOperation, from_camel_name

    try:
        return AclOperation(from_camel_name(AclOperation, name.strip()))
    except ValueError:
        return AclOperation.UNKNOWN


def _entries(args: argparse.Namespace, operation_names: Iterable[str]) -> set[Entry]:
    """Every allowed or denied principal with every operation from every host of its kind (AclCommand's getAcl)."""
    from minikafka.broker.security.acl import WILDCARD_HOST, AclPermissionType

    operations = {_operation(name) for name in operation_names}
    entries = set()
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in _principals(principals):
            for operation in operations:
                for host in [host.strip() for host in hosts] or [WILDCARD_HOST]:
                    entries.add(Entry(principal, host, operation, permission))
    return entries


def _resource_acls(args: argparse.Namespace) -> dict[Pattern, set[Entry]]:
    """Each resource (or filter) named and its entries, with --producer and --consumer expanded (AclCommand's
    getResourceFilterToAcls)."""
    from minikafka.broker.security.acl import SUPPORTED_OPERATIONS, AclOperation

    acls: dict[Pattern, set[Entry]] = {}
    if not args.producer and not args.consumer:
        entries = _entries(args, args.operation or ["All"])
        acls = {pattern: set(entries) for pattern in _patterns(args, required=True)}
    if args.producer:
        for pattern in _patterns(args, required=True):
            if pattern.resource_type.name in PRODUCER_OPERATIONS:
                acls[pattern] = _entries(args, PRODUCER_OPERATIONS[pattern.resource_type.name])
        if args.idempotent:
            acls[_cluster()] = _entries(args, ["IDEMPOTENT_WRITE"])
    if args.consumer:
        for pattern in _patterns(args, required=True):
            if pattern.resource_type.name in CONSUMER_OPERATIONS:
                acls.setdefault(pattern, set()).update(_entries(args, CONSUMER_OPERATIONS[pattern.resource_type.name]))
    for pattern, entries in acls.items():
        valid = SUPPORTED_OPERATIONS.get(pattern.resource_type, frozenset()) | {AclOperation.ALL}
        if any(entry.operation not in valid for entry in entries):
            raise CommandError(f"ResourceType {pattern.resource_type.name} only supports operations "
                               f"[{', '.join(operation.name for operation in sorted(valid))}]")
    return acls


def _add(args: argparse.Namespace) -> int:
    if args.resource_pattern_type not in ("LITERAL", "PREFIXED"):
        raise CommandError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid "
                           "when adding acls.")
    acls = _resource_acls(args)
    if not all(acls.values()):
        raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return _execute(args, lambda admin: _create(admin, acls))


def _remove(args: argparse.Namespace) -> int:
    acls = _resource_acls(args)
    return _execute(args, lambda admin: _delete(admin, acls, args.force))


def _list(args: argparse.Namespace) -> int:
    patterns = _patterns(args, required=False)
    principals = _principals(args.principal)
    return _execute(args, lambda admin: _print_acls(_describe(admin, patterns or [_every_resource()]), principals))


def _execute(args: argparse.Namespace, command: Callable[[KafkaAdminClient], None]) -> int:
    """Run `command` with an admin client of the broker; a failure there is one line, worded as kafka-acls.sh's."""
    from kafka.errors import KafkaError

    try:
        admin = admin_client(args, CLIENT_ID)
        try:
            command(admin)
        finally:
            admin.close()
    except (BrokerError, KafkaError, OSError, ValueError) as exc:
        print(f"{FAILURE}{error_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def _cluster() -> Pattern:
    from minikafka.broker.security.acl import CLUSTER_NAME, PatternType, ResourceType

    return Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


def _every_resource() -> Pattern:
    from minikafka.broker.security.acl import PatternType, ResourceType

    return Pattern(ResourceType.ANY, None, PatternType.ANY)


def _min_version(pattern: Pattern) -> int:
    return USER_RESOURCE_VERSION if pattern.resource_type.name == "USER" else 0


def _lines(entries: Iterable[Entry]) -> str:
    return "\n".join(f"\t{entry}" for entry in sorted(entries))


def _create(admin: KafkaAdminClient, acls: dict[Pattern, set[Entry]]) -> None:
    """CreateAcls per resource, each announced first, as AclCommand's addAcls."""
    from kafka.protocol.admin import CreateAclsRequest as R

    for pattern in sorted(acls):
        print(f"Adding ACLs for resource `{pattern}`: \n {_lines(acls[pattern])}\n", flush=True)
        response = _send(admin, R(min_version=_min_version(pattern), creations=[
            R.AclCreation(resource_type=pattern.resource_type, resource_name=pattern.name,
                          resource_pattern_type=pattern.pattern_type, principal=entry.principal, host=entry.host,
                          operation=entry.operation, permission_type=entry.permission_type)
            for entry in sorted(acls[pattern])]))
        for result in response.results:
            if result.error_code:
                raise BrokerError(result.error_code, result.error_message)


def _delete(admin: KafkaAdminClient, acls: dict[Pattern, set[Entry]], force: bool) -> None:
    """DeleteAcls per resource filter, once confirmed: the entries named, or without any every ACL of the resource
    (AclCommand's removeAcls)."""
    from kafka.protocol.admin import DeleteAclsRequest as R

    from minikafka.broker.security.acl import AclOperation, AclPermissionType

    for pattern in sorted(acls):
        entries = sorted(acls[pattern])
        if entries:
            question = f"Are you sure you want to remove ACLs: \n {_lines(entries)}\n from resource filter `{pattern}`?"
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{pattern}`?"
        if not force and not _confirmed(f"{question} (y/n)"):
            continue
        wire: list[tuple[str | None, str | None, AclOperation, AclPermissionType]] = [
            (e.principal, e.host, e.operation, e.permission_type) for e in entries]
        wire = wire or [(None, None, AclOperation.ANY, AclPermissionType.ANY)]
        response = _send(admin, R(min_version=_min_version(pattern), filters=[
            R.DeleteAclsFilter(resource_type_filter=pattern.resource_type, resource_name_filter=pattern.name,
                               pattern_type_filter=pattern.pattern_type, principal_filter=principal, host_filter=host,
                               operation=operation, permission_type=permission)
            for principal, host, operation, permission in wire]))
        for result in response.filter_results:
            failed = [(result.error_code, result.error_message)] + [
                (acl.error_code, acl.error_message) for acl in result.matching_acls]
            for code, message in failed:
                if code:
                    raise BrokerError(code, message)


def _confirmed(question: str) -> bool:
    print(question, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def _describe(admin: KafkaAdminClient, filters: list[Pattern]) -> dict[Pattern, set[Entry]]:
    """The ACLs of each resource filter (DescribeAcls), by resource pattern."""
    from kafka.protocol.admin import DescribeAclsRequest as R

    from minikafka.broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

    found: dict[Pattern, set[Entry]] = {}
    for pattern in filters:
        response = _send(admin, R(min_version=_min_version(pattern), resource_type_filter=pattern.resource_type,
                                  resource_name_filter=pattern.name, pattern_type_filter=pattern.pattern_type,
                                  principal_filter=None, host_filter=None, operation=AclOperation.ANY,
                                  permission_type=AclPermissionType.ANY))
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message)
        for resource in response.resources:
            described = Pattern(ResourceType(resource.resource_type), resource.resource_name,
                                PatternType(resource.pattern_type))
            found.setdefault(described, set()).update(
                Entry(acl.principal, acl.host, AclOperation(acl.operation), AclPermissionType(acl.permission_type))
                for acl in resource.acls)
    return found


def _print_acls(acls: dict[Pattern, set[Entry]], principals: list[str]) -> None:
    """Every resource's ACLs, or with --principal each principal's (AclCommand's listAcls)."""
    if not principals:
        _print_resources(acls)
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        _print_resources({pattern: {entry for entry in entries if entry.principal == principal}
                          for pattern, entries in acls.items()})


def _print_resources(acls: dict[Pattern, set[Entry]]) -> None:
    for pattern in sorted(acls):
        if acls[pattern]:
            print(f"Current ACLs for resource `{pattern}`:\n{_lines(acls[pattern])}\n")
