"""Client APIs that kafka-python has no classes for: KIP-848's consumer group and KIP-932's share group heartbeat,
describe and offsets.

Their specs are the JSON files beside this module, in the format of Kafka's own message specs, and load through
kafka-python's `ApiMessage`, so they encode and decode exactly as kafka-python's own client APIs do. `codec.SCHEMAS`
takes them in with those, so a handler module can serve them; ApiVersions advertises only what a handler serves.
"""
from kafka.protocol.api_message import ApiMessage

# `load_json` names the package holding a class's spec (kafka-python's metaclass reads it); mypy, to which
# kafka-python is untyped, checks the class keyword against object.__init_subclass__ instead.


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


CLIENT_API_MESSAGES: tuple[tuple[type[ApiMessage], type[ApiMessage]], ...] = (
    (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    (ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse),
    (ShareGroupDescribeRequest, ShareGroupDescribeResponse),
    (DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse),
    (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse),
    (DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse),
)
"""Each API's request and response classes, for the codec's table."""
