"""KIP-932's data APIs of share groups: ShareFetch (78), which acquires records for a member and may carry its
acknowledgements, and ShareAcknowledge (79), which only acknowledges; version 1 of each, as Kafka 4.1 serves them.

Their specs, beside this module, load through kafka-python's `ApiMessage` like the other client APIs' it lacks, so
the bytes are Kafka's both ways; ApiVersions advertises them only once a handler module serves them.
"""
from kafka.protocol.api_message import ApiMessage


class ShareFetchRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareFetchResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


SHARE_FETCH_MESSAGES: tuple[tuple[type[ApiMessage], type[ApiMessage]], ...] = (
    (ShareFetchRequest, ShareFetchResponse),
    (ShareAcknowledgeRequest, ShareAcknowledgeResponse),
)
"""Each API's request and response classes, for the codec's table."""
