"""Coordinators that keep their state in an internal topic: consumer groups (and, later, transactions)."""
