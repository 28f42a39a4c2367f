"""Kafka's ProducerIdControlManager: hands out blocks of producer ids, each one a ProducerIdsRecord that moves the
next free id past it, so a block is never handed out twice once the record is committed."""
from __future__ import annotations

from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.protocol.metadata_records import ProducerIdsRecord

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIdControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def generate_next_producer_id(self, broker_id: int, broker_epoch: int) -> tuple[ProducerIdsRecord, int, int]:
        """The record claiming the next block for the broker, and the block: (record, first id, count)."""
        start = self.image.next_producer_id
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                   next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return record, start, PRODUCER_ID_BLOCK_SIZE
