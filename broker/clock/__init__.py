"""The broker's clock: trio's clock of the node's run and its wall clock, which a test may move."""
