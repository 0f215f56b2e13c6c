"""Fixtures of the end-to-end tests: the real local Kafka broker (deploy/kafka-start.sh)."""

from __future__ import annotations

import os

import pytest

from dphhh.stream.broker import LocalBroker


@pytest.fixture(scope="session")
def broker():
    """This checkout's KRaft broker on 127.0.0.1:9092, started for the session if not running."""
    local = LocalBroker(9092)
    local.start()
    yield local
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # a worker's broker is shared: ./dphhh test stops it
        local.stop()
