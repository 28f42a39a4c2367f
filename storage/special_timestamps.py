"""ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).

A ListOffsets timestamp of zero or more asks for the first record at or after that time; these negative values ask
for a position in the log instead. Clients, the broker and the log read them from this one table.
"""
from enum import IntEnum


class SpecialTimestamp(IntEnum):
    LATEST_TIMESTAMP = -1  # the log end offset: for clients, the high watermark or last stable offset
    EARLIEST_TIMESTAMP = -2  # the log start offset
    MAX_TIMESTAMP = -3  # the record with the largest timestamp (KIP-734, ListOffsets v7+)
    EARLIEST_LOCAL_TIMESTAMP = -4  # the start of the local log; without tiered storage, the log start (KIP-405, v8+)
    LATEST_TIERED_TIMESTAMP = -5  # the last offset in tiered storage; there is none here (KIP-1005, v9+)
    EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # the first offset not yet in tiered storage; none here (KIP-1023, v11+)
