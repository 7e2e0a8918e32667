"""Fixtures for the whole suite: Apache Kafka beside shoal (tests/reference/fixtures.py)."""

pytest_plugins = ["tests.reference.fixtures"]
