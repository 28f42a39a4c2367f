"""KIP-932 share groups on the partition leader: share partitions, share fetch and acknowledge, share sessions."""
