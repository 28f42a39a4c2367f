"""Kafka's LogOffsetMetadata: an offset together with the segment and byte position of the batch that holds it.

Two of these on the same segment (equal segment base offsets) give the bytes between them by subtracting their
positions. That is how a parked fetch counts what has accumulated past its fetch offset without reading any of it.
"""
from __future__ import annotations

from typing import NamedTuple


class LogOffsetMetadata(NamedTuple):
    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int
