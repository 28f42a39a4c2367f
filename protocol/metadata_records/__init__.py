"""KRaft metadata records (the controller's state changes) and the framing that makes them record values."""
from .records import (
    RECORD_CLASSES,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    record_type,
)
from .serde import FRAME_VERSION, MetadataRecordError, decode_record, encode_record

__all__ = [
    "FRAME_VERSION",
    "RECORD_CLASSES",
    "BrokerRegistrationChangeRecord",
    "ConfigRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "MetadataRecordError",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "decode_record",
    "encode_record",
    "record_type",
]
