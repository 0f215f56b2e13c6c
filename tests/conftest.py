"""Common test set-up: the ``e2e`` marker on every test that needs real outside programs.

``./dphhh test -m "not e2e"`` runs the plain-logic tests only: no JVM, no Kafka broker, no Flink
job, no browser, no Debian flow tools. The end-to-end tests are those in ``tests/e2e/`` and the
few modules elsewhere that start one of those programs (listed in :data:`E2E_MODULES`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
E2E_DIRS = (HERE / "e2e",)
E2E_MODULES = {
    HERE / "connectors" / "test_flow_pipeline.py",  # softflowd, nfacctd and the broker
    HERE / "stream" / "test_metric_filter.py",  # Flink's own reporter filter, in a JVM
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        if path in E2E_MODULES or any(d in path.parents for d in E2E_DIRS):
            item.add_marker(pytest.mark.e2e)
