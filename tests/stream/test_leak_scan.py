"""The leak scans of the end-to-end tests must be able to fail: every print format of an exact count
is found, and log line stamps are not mistaken for counts."""

from __future__ import annotations

from tests.e2e.jobs import leaked_counts, mask_times, number_tokens


def test_every_format_of_a_count_is_found() -> None:
    """Prometheus and json.dumps print 12347.0; humans 12,347; numpy 1.2347e+04; all are caught, in
    any surrounding (labels, JSON, prose)."""
    for text in (
        'dphhh_x{a="b"} 12347.0',
        '{"n": 12347}',
        "n=12347,",
        "12,347 elements",
        "1.2347e+04",
        '"out_of_domain": 3331.0, "n": 12347',
        "took 12347ms",
        "count_12347",
        "x12347y",
        "a,12347",
        "c12347d",  # glued to hex letters, but too short for an id
        "n=12347_windows",
    ):
        assert leaked_counts(text, [12347, 999]) == {12347}, text


def test_near_misses_are_not_counts() -> None:
    """Other numbers that merely contain the digits are not flagged (the scan stays usable on logs)."""
    for text in (
        "123470",
        "1.12347",
        "v0.12347",
        "2026-12-01 08:57:12,347 INFO",
        "at 12:34:56.12347",
        "job 3f2a9c0012347bd1e0f3a9c0012347bd",  # a random hex id, not a number
        "session=0b12347e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
        "attempt ff12a9e9acec12347c9dc123a5f0ada_4d12347e3fd2af_0_0 switched",  # Flink's joined ids
        "HashMapStateBackend@9c912347",  # an object's hash
        "at org.apache.flink.runtime.taskmanager.Task.run(Task.java:12347)",  # a source position
        "deploy/jars/gateway-lib/12347da9b0ae/",  # a folder named by a digest
        "[Producer clientId=x] ProducerId set to 12347 with epoch 0",  # numbered by the broker
    ):
        assert not leaked_counts(text, [12347]), text
    assert mask_times("2026-12-01 08:57:10,744 INFO") == "<time> INFO"
    assert number_tokens("a 5, b 6.5, c -7") == {5.0, 6.5, -7.0}
