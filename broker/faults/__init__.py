"""Fault injection on the broker: injected error codes, response latency and a disk quota, none of which touches
stored data. `rules` is what a fault matches, `injector` the request hook that applies them, `shaping` the error
responses built from a request's own shape, `disk_quota` the cap that makes appends fail as on a full disk."""
