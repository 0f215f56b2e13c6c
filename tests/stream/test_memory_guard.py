"""Memory guards (stream/cli/memory.py): predictable allocations are refused before the input is read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dphhh.sketches.errors import UsageError
from dphhh.stream.cli import main
from dphhh.stream.cli import memory as memory_mod
from dphhh.stream.cli import snapshot as snapshot_mod
from dphhh.stream.cli.memory import available_memory, check_memory, format_bytes, parse_max_memory


@pytest.fixture
def unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make reading the snapshot fail loudly: a refusal before the read never gets there."""

    def refuse(*args, **kwargs):
        raise AssertionError("the input was read")

    monkeypatch.setattr(snapshot_mod, "read_snapshot", refuse)
    monkeypatch.setattr(snapshot_mod, "spooled_input", refuse)  # nor is standard input spooled


@pytest.fixture
def two_columns(tmp_path: Path) -> Path:
    """The issue's input: 2,000 rows of (port, size)."""
    rng = np.random.default_rng(1)
    f = tmp_path / "flows.csv"
    f.write_text(
        "a,b\n" + "".join(f"{x},{y}\n" for x, y in zip(rng.integers(0, 65536, 2000), rng.integers(0, 1501, 2000)))
    )
    return f


def test_available_memory_and_the_default_limit() -> None:
    """MemAvailable (or sysconf) is a positive number of bytes; the default limit is 80 % of it."""
    avail = available_memory()
    assert avail > 0
    assert 0.7 * avail <= parse_max_memory(None) <= 0.9 * max(avail, available_memory())


def test_parse_and_check_memory() -> None:
    """Sizes parse with dphhh plan's units; check_memory refuses above the limit with the estimate,
    the limit and the option names, and passes at or below it."""
    assert parse_max_memory("2GiB") == 2 << 30 and parse_max_memory("500MB") == 500 * 10**6
    with pytest.raises(UsageError, match="--max-memory must be a number"):
        parse_max_memory("lots")
    check_memory(100, "--domain: x", "use less", 100)
    with pytest.raises(UsageError) as info:
        check_memory(34 << 30, "--domain: AHEAD over 65536 x 65536", "use a coarser --domain", 19 << 30)
    assert str(info.value) == (
        "--domain: AHEAD over 65536 x 65536 needs ~34 GiB (limit 19 GiB, --max-memory); use a coarser --domain"
    )
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(12) == "12 B"


def test_ahead_over_two_wide_columns_is_refused_before_the_input_is_read(capsys, two_columns: Path, unread) -> None:
    """The issue's command (2 columns, 0:65535 x 0:1500) pads to a 65536 x 65536 grid: it is refused
    with exit 2, the estimate and --max-memory, and the reader is never called (it would raise)."""
    argv = ["snapshot", "ahead", "--input", str(two_columns), "--column", "a", "--column", "b"]
    argv += ["--domain", "0:65535", "--domain", "0:1500", "--epsilon", "1", "--query", "0:1023,0:1500"]
    assert main([*argv, "--max-memory", "19GiB"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("dphhh snapshot ahead: error: --domain: AHEAD over 65,536 x 65,536"), err
    assert "GiB (limit 19 GiB, --max-memory)" in err and "coarser --domain" in err
    assert "needs ~" in err and "the input was read" not in err
    assert main(argv) == 2  # the default limit (80 % of this machine) refuses it too
    assert "--max-memory" in capsys.readouterr().err


def test_ahead_within_the_limit_runs(capsys, two_columns: Path) -> None:
    """A coarse domain fits (and the guard leaves the run alone)."""
    argv = ["snapshot", "ahead", "--input", str(two_columns), "--column", "a", "--column", "b", "--seed", "1"]
    argv += ["--domain", "0:65535", "--domain", "0:1500", "--epsilon", "1", "--query", "0:1023,0:1500"]
    assert main([*argv, "--branching", "256"]) == 2  # 2^16 x 2^16 still: --branching does not help
    capsys.readouterr()
    coarse = ["--domain", "0:255", "--domain", "0:255", "--query", "0:15,0:255"]
    assert main([*argv[:10], *coarse, "--epsilon", "1", "--max-memory", "1GiB"]) == 0
    assert '"fraction"' in capsys.readouterr().out


def test_lue_over_a_huge_domain_is_refused_before_the_tree_is_built(capsys, two_columns: Path, unread) -> None:
    """LUE-DPTree builds a tree with a leaf per value: --domain over 2^62 values is refused at once."""
    code = main(
        ["snapshot", "lue", "--input", str(two_columns), "--column", "a", "--epsilon", "1"]
        + ["--domain=-4611686018427387904:4611686018427387904", "--query", "0:10"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--domain: LUE-DPTree over" in err and "--max-memory" in err and "narrower --domain" in err
    code = main(
        ["snapshot", "lue", "--input", str(two_columns), "--column", "a", "--epsilon", "1"]
        + ["--domain", "0:4000", "--query", "0:10", "--max-memory", "100MB"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--no-blue" in err  # BLUE's exact error matrices dominate at n <= 4096


def test_inftda_refuses_a_level_that_would_not_fit_before_allocating_it(capsys, tmp_path: Path) -> None:
    """InfTDA's level 2 of ipv4:8,24 noises 2^16 children of every kept /8: known once level 1 is
    released, refused then (exit 2, nothing on stdout), with --max-memory and --hierarchy named."""
    rng = np.random.default_rng(2)
    f = tmp_path / "a.txt"
    f.write_text("".join(f"{a}.{b}.{c}.1\n" for a, b, c in rng.integers(1, 200, (3000, 3))))
    argv = ["snapshot", "inftda", "--input", str(f), "--hierarchy", "ipv4:8,24", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--max-memory", "1MiB", "--seed", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error: --hierarchy: InfTDA level 2/2 noises" in captured.err and "--max-memory" in captured.err
    assert "smaller steps" in captured.err


def test_default_limit_is_read_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --max-memory the limit is 80 % of what available_memory says."""
    monkeypatch.setattr(memory_mod, "available_memory", lambda: 10 << 30)
    assert parse_max_memory(None) == int(0.8 * (10 << 30))


def test_standard_input_and_gzip_are_read_after_the_checks(capsys, two_columns: Path, monkeypatch) -> None:
    """--input - and FILE.gz still work (spooled when read); a refusal with --input - leaves stdin unread."""
    import gzip
    import io
    import sys

    gz = two_columns.with_suffix(".csv.gz")
    gz.write_bytes(gzip.compress(two_columns.read_bytes()))
    argv = ["snapshot", "lue", "--column", "a", "--epsilon", "1", "--domain", "0:65535", "--query", "0:1023"]
    assert main([*argv, "--input", str(gz), "--seed", "1"]) == 0
    assert '"count"' in capsys.readouterr().out
    stdin = io.BytesIO(two_columns.read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    assert main([*argv, "--input", "-", "--max-memory", "1k"]) == 2
    assert "--max-memory" in capsys.readouterr().err and stdin.tell() == 0
    assert main([*argv, "--input", "-", "--input-format", "csv", "--seed", "1"]) == 0
    assert '"count"' in capsys.readouterr().out and stdin.tell() > 0
