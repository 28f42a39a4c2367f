"""Embedding and test-framework integration."""
