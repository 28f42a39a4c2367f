"""Test-framework integration: the pytest plugin, on the public handles (which never import this package)."""
