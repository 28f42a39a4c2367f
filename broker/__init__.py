"""The trio broker: server, request handlers, replica manager, purgatory."""
