"""`minikafka features describe|upgrade|downgrade`: kafka-features.sh over Kafka's APIs (KIP-584): the features the
brokers support and the levels the cluster has finalized (ApiVersions v3+), changed with UpdateFeatures.

describe prints kafka-features.sh's line per supported feature, by name: "Feature: group.version\t
SupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: 12" (level 0 when not finalized).
upgrade and downgrade take --feature NAME=LEVEL (repeatable; a name at most once); downgrade is a safe downgrade,
an unsafe one with --unsafe; --dry-run only validates. Each feature's outcome is printed as Kafka's tool prints it,
"group.version was downgraded to 0." ("can be" on a dry run), or "Could not downgrade group.version to 0. <the
controller's message>", and a failure ends with "1 out of 1 operation(s) failed." and exit code 1.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from minikafka.cli_common import CommandError, add_bootstrap, admin_client, run_guarded

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

CLIENT_ID = "minikafka-features"
API_VERSIONS_VERSION = 4  # the first to list features supported from level 0
UPDATE_FEATURES_VERSION = 1  # the last that answers per feature
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("features", help="describe, upgrade and downgrade finalized features (like kafka-features.sh)",
                       description="Describe the cluster's features and change their finalized levels, with "
                                   "kafka-features.sh's options and output.")
    actions = p.add_subparsers(dest="action", required=True)
    describe = actions.add_parser("describe", help="print each supported feature and its finalized level")
    add_bootstrap(describe)
    for name, text in (("upgrade", "raise finalized levels"), ("downgrade", "lower finalized levels (0: off)")):
        action = actions.add_parser(name, help=text)
        add_bootstrap(action)
        action.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                            help="a feature and its new level (repeatable)")
        action.add_argument("--dry-run", action="store_true", help="validate only: nothing changes")
        if name == "downgrade":
            action.add_argument("--unsafe", action="store_true", help="allow a downgrade that may lose metadata")


def run(args: argparse.Namespace) -> int:
    return run_guarded(_describe if args.action == "describe" else _update, args)


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def _describe(args: argparse.Namespace) -> int:
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest

    admin = admin_client(args, CLIENT_ID)
    try:
        response = _send(admin, ApiVersionsRequest[API_VERSIONS_VERSION](client_software_name=CLIENT_ID,
                                                                         client_software_version="1"))
    finally:
        admin.close()
    finalized = {f.name: f.max_version_level for f in response.finalized_features or []}
    epoch = response.finalized_features_epoch
    for feature in sorted(response.supported_features or [], key=lambda f: f.name):
        print(f"Feature: {feature.name}\tSupportedMinVersion: {feature.min_version}\tSupportedMaxVersion: "
              f"{feature.max_version}\tFinalizedVersionLevel: {finalized.get(feature.name, 0)}\t"
              f"Epoch: {epoch if epoch >= 0 else '-'}")
    return 0


def parse_feature_levels(items: list[str]) -> dict[str, int]:
    """kafka-features.sh's --feature NAME=LEVEL values, with its messages."""
    levels: dict[str, int] = {}
    for item in items:
        name, sep, level = item.partition("=")
        if not sep:
            raise CommandError(f"Can't parse feature=level string {item}: equals sign not found.")
        try:
            value = int(level.strip())
            if not -2**15 <= value < 2**15:
                raise ValueError(level)
        except ValueError:
            raise CommandError(f"Can't parse feature=level string {item}: unable to parse {level.strip()} as a "
                               "short.") from None
        if name.strip() in levels:
            raise CommandError(f"Feature {name.strip()} was specified more than once.")
        levels[name.strip()] = value
    return levels


def _update(args: argparse.Namespace) -> int:
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest

    op = args.action
    levels = parse_feature_levels(args.feature)
    if not levels:
        raise CommandError(f"You must specify at least one feature to {op}")
    kind = UPGRADE if op == "upgrade" else UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
    R = UpdateFeaturesRequest[UPDATE_FEATURES_VERSION]
    request = R(timeout_ms=60000, validate_only=args.dry_run,
                feature_updates=[R.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
                                 for name, level in levels.items()])
    admin = admin_client(args, CLIENT_ID)
    try:
        response = _send(admin, request)
    finally:
        admin.close()
    # As Kafka's admin client: a top-level error is every feature's; else each feature's own result.
    errors = {name: (response.error_code, response.error_message) for name in levels} if response.error_code else {
        r.feature: (r.error_code, r.error_message) for r in response.results}
    failures = 0
    for name in sorted(levels):
        code, message = errors.get(name, (0, None))
        if code:
            failures += 1
            print(f"{'Can not' if args.dry_run else 'Could not'} {op} {name} to {levels[name]}. {message}")
        else:
            print(f"{name} {'can be' if args.dry_run else 'was'} {op}d to {levels[name]}.")
    if failures:
        raise CommandError(f"{failures} out of {len(levels)} operation(s) failed.")
    return 0
