"""KIP-932's share-group state APIs (83-87): a share-partition leader asks the share coordinator to initialize,
read, write, summarize or delete the state it persists in `__share_group_state`.

Kafka serves them on the inter-broker listener only; their specs, beside this module, load through kafka-python's
`ApiMessage` like the client APIs' so the bytes are Kafka's both ways.
"""
from kafka.protocol.api_message import ApiMessage


class InitializeShareGroupStateRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


SHARE_STATE_MESSAGES: tuple[tuple[type[ApiMessage], type[ApiMessage]], ...] = (
    (InitializeShareGroupStateRequest, InitializeShareGroupStateResponse),
    (ReadShareGroupStateRequest, ReadShareGroupStateResponse),
    (WriteShareGroupStateRequest, WriteShareGroupStateResponse),
    (DeleteShareGroupStateRequest, DeleteShareGroupStateResponse),
    (ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse),
)
"""Each API's request and response classes, for the codec's table."""
