"""KIP-848 consumer groups (Kafka's modern/consumer): members, the group, reconciliation and target assignment, as
pure state that changes only by replaying the records the coordinator writes."""
