"""Merging share-partition state batches into one sorted, non-overlapping list (Kafka's
PersisterStateBatchCombiner semantics).

Where batches overlap, an offset takes the state of the batch with the higher delivery count, then the higher
delivery state (a terminal state beats AVAILABLE at the same count); offsets below the start offset are dropped;
contiguous ranges with the same state and count become one batch.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable

from minikafka.protocol.coordinator_records.share_coordinator_records import StateBatch


def combine_state_batches(so_far: Iterable[StateBatch], new: Iterable[StateBatch],
                          start_offset: int) -> tuple[StateBatch, ...]:
    """The batches of `so_far` overlaid with `new`, pruned below `start_offset` (-1: no pruning)."""
    batches = []
    for batch in (*so_far, *new):
        if start_offset != -1:
            if batch.last_offset < start_offset:
                continue
            if batch.first_offset < start_offset:
                batch = StateBatch(start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
        batches.append(batch)
    batches.sort(key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    # Sweep the offsets left to right; `active` holds the covering batches, best delivery info first.
    active: list[tuple[int, int, int]] = []  # (-count, -state, last offset)
    i = 0
    position = batches[0].first_offset if batches else 0
    while i < len(batches) or active:
        while active and active[0][2] < position:
            heapq.heappop(active)
        if not active:
            if i >= len(batches):
                break
            position = max(position, batches[i].first_offset)
        while i < len(batches) and batches[i].first_offset <= position:
            b = batches[i]
            if b.last_offset >= position:
                heapq.heappush(active, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        if not active:
            continue
        count, state, last = -active[0][0], -active[0][1], active[0][2]
        # The winner holds until it ends or a later batch starts (which may beat it).
        end = last if i >= len(batches) else min(last, batches[i].first_offset - 1)
        if out and out[-1].last_offset == position - 1 and (out[-1].delivery_count, out[-1].delivery_state) == (
                count, state):
            out[-1] = StateBatch(out[-1].first_offset, end, state, count)
        else:
            out.append(StateBatch(position, end, state, count))
        position = end + 1
    return tuple(out)
