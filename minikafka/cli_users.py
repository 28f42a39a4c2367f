"""`minikafka users --describe|--alter`: kafka-configs.sh --entity-type users, over Kafka's admin APIs: users' SCRAM
credentials (DescribeUserScramCredentials / AlterUserScramCredentials, KIP-554) and client quotas
(DescribeClientQuotas / AlterClientQuotas, KIP-546).

--describe [--user NAME] prints what kafka-configs.sh prints: the user's quotas, "Quota configs for user-principal
'alice' are producer_byte_rate=1048576.0" (values as Java prints a double), then its SCRAM credentials, "SCRAM
credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096".
Without --user, every user's (the default quotas as "the default user-principal"). A user without credentials gets
no SCRAM line, as Kafka's admin client leaves such a user out.

--alter --user NAME takes --add-config 'KEY=VALUE,...' (a value's commas kept inside [], as in
'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'), or --add-config-file, and --delete-config KEY,...: SCRAM
mechanisms or the quota keys of users (producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate), never both at once. A credential's iterations default to 4096 (at least the mechanism's
minimum); its password is salted and hashed here, as Kafka's admin client does, and never sent. A quota deleted must
be set. Success prints "Completed updating config for user NAME.".

The requests go over kafka-python's admin client, but are built and read here: kafka-python has no client quota
calls, and its SCRAM calls keep no error codes (a user without credentials is an error code, not a message).
"""
from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from minikafka.broker.metadata.client_quota_entity import USER, USER_AND_CLIENT_KEYS
from minikafka.cli_common import BrokerError, CommandError, add_bootstrap, admin_client, run_guarded

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

    from minikafka.broker.security.scram import ScramMechanism

CLIENT_ID = "minikafka-users"
DEFAULT_ITERATIONS = 4096  # Kafka's ConfigCommand default
# DescribeClientQuotas' match types: an entity's name, its type's default, any name of the type (Kafka's
# ClientQuotaFilterComponent.ofEntity, ofDefaultEntity, ofEntityType).
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# ConfigCommand's parsing of --add-config: commas and `=` inside [] are the value's, the brackets are dropped.
OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
CONFIG_KEY = re.compile(r"[a-zA-Z0-9._-]*")
CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("users", help="describe and alter users' SCRAM credentials and quotas (like kafka-configs.sh "
                                     "--entity-type users)",
                       description="Describe and alter users' SCRAM credentials and client quotas with "
                                   "kafka-configs.sh's options and output for --entity-type users.")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print the user's (or every user's) quotas and "
                                                                "SCRAM credentials")
    action.add_argument("--alter", action="store_true", help="add or delete the user's SCRAM credentials or quotas")
    p.add_argument("--user", "--entity-name", dest="user", metavar="NAME",
                   help="the user's principal name (--describe without it: every user)")
    p.add_argument("--entity-type", choices=["users"], help="users, the only entity type here (kafka-configs.sh "
                                                            "takes it)")
    p.add_argument("--add-config", metavar="KEY=VALUE,...",
                   help="configs to add, [] around a value with commas: "
                        "'SCRAM-SHA-512=[iterations=8192,password=alice-secret]', 'producer_byte_rate=1048576'")
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to add")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY,...",
                   help="configs to delete, e.g. SCRAM-SHA-512 or producer_byte_rate (repeatable)")


def run(args: argparse.Namespace) -> int:
    return run_guarded(_alter if args.alter else _describe, args)


def _describe(args: argparse.Namespace) -> int:
    for option in ("add_config", "add_config_file", "delete_config"):
        if getattr(args, option):
            raise CommandError(f"Option \"[describe]\" can't be used with option \"[{option.replace('_', '-')}]\"")
    admin = admin_client(args, CLIENT_ID)
    try:
        _print_quotas(admin, args.user)
        _print_credentials(admin, args.user)
    finally:
        admin.close()
    return 0


def _alter(args: argparse.Namespace) -> int:
    """ConfigCommand's alter of a user: its checks and messages, then one request (quotas or credentials)."""
    from minikafka.broker.security.scram import ScramMechanism  # lazy: it would slow every command's start

    if args.user is None:
        raise CommandError("An entity-name or default entity must be specified with --alter of users, clients, "
                           "brokers or ips")
    if args.add_config is not None and args.add_config_file:
        raise CommandError("Only one of --add-config or --add-config-file must be specified")
    if args.add_config is None and not args.add_config_file and not args.delete_config:
        raise CommandError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                           "with --alter")
    to_add = _configs_to_add(args)
    to_delete = [name.strip() for item in args.delete_config for name in item.split(",")]
    for verb, names in (("added", list(to_add)), ("deleted", to_delete)):
        unknown = [name for name in names
                   if ScramMechanism.for_mechanism_name(name) is None and name not in USER_AND_CLIENT_KEYS]
        if unknown:
            raise CommandError(f"Only quota and SCRAM credential configs can be {verb} for 'users' using "
                               f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
    names = [*to_add, *to_delete]
    quotas = any(name in USER_AND_CLIENT_KEYS for name in names)
    if quotas and any(ScramMechanism.for_mechanism_name(name) for name in names):
        raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                           "--bootstrap-server.")
    admin = admin_client(args, CLIENT_ID)
    try:
        if quotas:
            _alter_quotas(admin, args.user, {key: _quota(key, value) for key, value in to_add.items()}, to_delete)
        else:
            _alter_credentials(admin, args.user, to_add, to_delete)
    finally:
        admin.close()
    print(f"Completed updating config for user {args.user}.")
    return 0


def _configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    """--add-config-file's properties, then --add-config's pairs (ConfigCommand's parseConfigsToBeAdded)."""
    from minikafka.storage.properties import read_properties

    configs = read_properties(args.add_config_file) if args.add_config_file else {}
    if args.add_config is not None:
        pairs = re.split("," + OUTSIDE_BRACKETS, args.add_config)
        while pairs and not pairs[-1]:  # as Java's split, which drops trailing empty strings
            pairs.pop()
        for pair in pairs:
            key_value = re.split(r"\s*=\s*" + OUTSIDE_BRACKETS, pair)
            if len(key_value) != 2:
                raise CommandError("Invalid entity config: all configs to be added must be in the format \"key=val\".")
            configs[key_value[0].strip()] = re.sub(r"[\[\]]", "", key_value[1]).strip()
    for key in configs:
        if not CONFIG_KEY.fullmatch(key):
            raise CommandError(f"Invalid character found for config key: {key}")
    return configs


def _quota(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise CommandError(f"Cannot parse quota configuration value for {key}: {value}") from None


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def _quotas(admin: KafkaAdminClient, user: str | None) -> list[tuple[str | None, dict[str, float]]]:
    """(user name, None for the default; its quotas) of the user, or of every user (DescribeClientQuotas)."""
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R

    component = R.ComponentData(entity_type=USER, match_type=MATCH_SPECIFIED if user is None else MATCH_EXACT,
                                match=user)
    response = _send(admin, R(components=[component], strict=True))
    if response.error_code:
        raise BrokerError(response.error_code, response.error_message)
    return [({e.entity_type: e.entity_name for e in entry.entity}.get(USER), {v.key: v.value for v in entry.values})
            for entry in response.entries or []]


def _print_quotas(admin: KafkaAdminClient, user: str | None) -> None:
    for name, values in sorted(_quotas(admin, user), key=lambda quota: (quota[0] is not None, quota[0] or "")):
        who = "the default user-principal" if name is None else f"user-principal '{name}'"
        print(f"Quota configs for {who} are {', '.join(f'{k}={java_double(v)}' for k, v in sorted(values.items()))}")


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it, as Kafka's tools print quotas: 1024.0, 0.5, 1.048576E7."""
    from decimal import Decimal

    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if value < 0 else ''}{text[0]}.{text[1:] or '0'}E{len(digits) + int(exponent) - 1}"


def _print_credentials(admin: KafkaAdminClient, user: str | None) -> None:
    """Each user's SCRAM mechanisms and iterations (DescribeUserScramCredentials, no users meaning all)."""
    from kafka.protocol.admin.users import DescribeUserScramCredentialsRequest as R

    from minikafka.broker.security.scram import ScramMechanism
    from minikafka.protocol.errors import ErrorCode

    response = _send(admin, R(users=[] if user is None else [R.UserName(name=user)]))
    if response.error_code:
        raise BrokerError(response.error_code, response.error_message)
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if result.error_code:
            print(f"Error retrieving SCRAM credential configs for user-principal '{result.user}': "
                  f"{BrokerError(result.error_code, result.error_message)}")
            continue
        mechanisms = {mechanism.type_id: mechanism.mechanism_name for mechanism in ScramMechanism}
        credentials = ", ".join(f"{mechanisms.get(info.mechanism, 'UNKNOWN')}=iterations={info.iterations}"
                                for info in result.credential_infos)
        print(f"SCRAM credential configs for user-principal '{result.user}' are {credentials}")


def _alter_credentials(admin: KafkaAdminClient, user: str, to_add: dict[str, str], to_delete: list[str]) -> None:
    """One AlterUserScramCredentials: deletions, then upsertions with a fresh salt each (Kafka's admin client's)."""
    from kafka.protocol.admin.users import AlterUserScramCredentialsRequest as R

    from minikafka.broker.security.scram import ScramMechanism, salted_password, secure_random_string

    mechanisms = {mechanism.mechanism_name: mechanism for mechanism in ScramMechanism}
    deletions = [R.ScramCredentialDeletion(name=user, mechanism=mechanisms[name].type_id) for name in to_delete]
    upsertions = []
    for name, value in to_add.items():
        mechanism = mechanisms[name]
        iterations, password = _iterations_and_password(mechanism, value)
        salt = secure_random_string().encode()
        upsertions.append(R.ScramCredentialUpsertion(
            name=user, mechanism=mechanism.type_id, iterations=iterations, salt=salt,
            salted_password=salted_password(mechanism, password, salt, iterations)))
    if not deletions and not upsertions:
        return
    response = _send(admin, R(deletions=deletions, upsertions=upsertions))
    for result in response.results:
        if result.error_code:
            raise BrokerError(result.error_code, result.error_message)


def _iterations_and_password(mechanism: ScramMechanism, value: str) -> tuple[int, str]:
    """`[iterations=N,]password=P` (N of -1 or none: the default), as ConfigCommand reads a credential."""
    match = CREDENTIAL.fullmatch(value)
    if match is None:
        raise CommandError(f"Invalid credential property {mechanism.name}={value}")
    iterations = DEFAULT_ITERATIONS if match[1] in (None, "-1") else int(match[1])
    if iterations < mechanism.min_iterations:
        raise CommandError(f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} required "
                           f"for {mechanism.mechanism_name}")
    return iterations, match[2]


def _alter_quotas(admin: KafkaAdminClient, user: str, to_add: dict[str, float], to_delete: list[str]) -> None:
    """One AlterClientQuotas of the user, once the quotas to delete are known to be set (ConfigCommand's check)."""
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R

    current = next((values for _, values in _quotas(admin, user)), {})
    invalid = [key for key in to_delete if key not in current]
    if invalid:
        raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    ops = [R.EntryData.OpData(key=key, value=value, remove=False) for key, value in to_add.items()]
    ops += [R.EntryData.OpData(key=key, value=0.0, remove=True) for key in to_delete]
    entity = [R.EntryData.EntityData(entity_type=USER, entity_name=user)]
    response = _send(admin, R(entries=[R.EntryData(entity=entity, ops=ops)], validate_only=False))
    for entry in response.entries:
        if entry.error_code:
            raise BrokerError(entry.error_code, entry.error_message)
