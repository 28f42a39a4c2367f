"""KIP-932's share coordinator: each share partition's durable state, kept in `__share_group_state`."""
