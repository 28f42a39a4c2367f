"""KRaft's metadata records: the changes to cluster state that the controller writes to `__cluster_metadata`.

Their specs are the JSON files beside this module, in the format of Kafka's own message specs, with the record
type as `apiKey`. They load through kafka-python's `ApiData` (a versioned data message, flexible from version 0,
as Kafka's metadata records are), so fields, defaults and tagged fields follow the spec. A record carries no name
on the wire, only its type and version, which the frame around it holds (see `serde`).
"""
from kafka.protocol.api_data import ApiData

# `load_json` names the package holding a class's spec (kafka-python's metaclass reads it); mypy, to which
# kafka-python is untyped, checks the class keyword against object.__init_subclass__ instead.
#
# A field named `Name` becomes the instance attribute `name`, which hides ApiData's `name` class property on that
# class: the spec's name is `json["name"]`.


class RegisterBrokerRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class UnregisterBrokerRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class TopicRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class PartitionRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class ConfigRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class PartitionChangeRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class FenceBrokerRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class UnfenceBrokerRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class RemoveTopicRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class FeatureLevelRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class ProducerIdsRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class BrokerRegistrationChangeRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class ClientQuotaRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class UserScramCredentialRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class RemoveUserScramCredentialRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class AccessControlEntryRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


class RemoveAccessControlEntryRecord(ApiData, load_json=__package__):  # type: ignore[call-arg]
    pass


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | ClientQuotaRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | FeatureLevelRecord
)


def record_type(record_class: type[MetadataRecord]) -> int:
    """The record type (Kafka's MetadataRecordType id) that names `record_class` in a record's frame."""
    key: int = record_class.json["apiKey"]
    return key


RECORD_CLASSES: dict[int, type[MetadataRecord]] = {
    record_type(cls): cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        ProducerIdsRecord,
        BrokerRegistrationChangeRecord,
        ClientQuotaRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        FeatureLevelRecord,
    )
}
"""Record class by record type: the types the controller writes and reads."""
