"""KIP-932 share groups on the group coordinator: the group, its members, their records and replay."""
