"""Fault injection on the broker: injected error codes, response latency, a disk quota, cut links between nodes and
paused replica fetching, none of which touches stored data. `rules` is what an error or latency fault matches,
`injector` the request hook that applies the faults, `shaping` the error responses built from a request's own shape,
`disk_quota` the cap that makes appends fail as on a full disk, `link_faults` a network partition between nodes
(with `peer_control` reaching the other end of a cut made both ways), `fetch_pauses` a follower that stops fetching."""
