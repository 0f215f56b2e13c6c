"""The batch commands as an operator uses them (issue "an operator's tool"): decision-ready text,
one vocabulary and ``--format`` across commands, warnings before noise, errors that name the option
typed, stdin and gzip inputs, internal errors told apart from usage errors.

Each test reproduces one finding of the issue and fails on the behaviour it reported.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dphhh.stream.cli import main
from dphhh.stream.cli.output import WIDTH
from dphhh.stream.paths import data_dir

SYNACK = data_dir() / "pcaps" / "amp.TCP.reflection.SYNACK.pcap"
BASE = ["--epsilon", "1", "--delta", "1e-6", "--seed", "3"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _ipv4_file(tmp_path: Path, rows: int = 2000, name: str = "ips.txt") -> Path:
    rnd = random.Random(7)
    lines = []
    for _ in range(rows):
        if rnd.random() < 0.5:
            lines.append(f"10.20.{rnd.randrange(4)}.{rnd.randrange(256)}")
        else:
            lines.append(".".join(str(rnd.randrange(1, 255)) for _ in range(4)))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- text that decides


def test_text_report_has_coverage_line_verdicts_and_a_legend(capsys) -> None:
    """The SYN-ACK capture at ε = 1 with τ below 2·α1 (≈ 584 with the tight calibration; the issue
    found it at τ = 1000 with the paper's): coverage is void and the text says so; every prefix
    has a verdict; no negative lower bound; no residual above its count."""
    code, out, err = _run(capsys, "hhh", "--input", str(SYNACK), *BASE, "--tau", "500", "--format", "text")
    assert code == 0, err
    assert "coverage: VOID" in out and "2*alpha1" in out
    table = [ln for ln in out.splitlines() if ln.strip().startswith(("heavy", "possible"))]
    assert table, out
    assert any(ln.strip().startswith("heavy") for ln in table)
    assert "heavy: its count" in out and "possible: listed because" in out
    assert "[-" not in out  # intervals are clipped at 0
    report = json.loads(_run(capsys, "hhh", "--input", str(SYNACK), *BASE, "--tau", "500")[1])
    for item in report["hhh"]:
        assert 0 <= item["residual"] <= max(item["count"], 0)
        assert item["verdict"] in ("heavy", "possible")
        assert item["lower"] >= 0
        assert (item["verdict"] == "heavy") == (item["residual_lower"] >= report["params"]["tau"])


def test_coverage_line_says_holds_when_tau_is_large_enough(capsys) -> None:
    code, out, err = _run(capsys, "hhh", "--input", str(SYNACK), *BASE, "--tau", "1000", "--format", "text")
    assert code == 0, err
    assert "coverage: HOLDS" in out
    code, out, err = _run(
        capsys, "hhh", "--input", str(SYNACK), *BASE, "--tau", "1000", "--calibration", "paper", "--format", "text"
    )
    assert code == 0, err
    assert "coverage: VOID" in out  # the finding: the paper's calibration, alpha1 ~ 875


@pytest.mark.parametrize("top", [None, 5])
def test_pretty_table_fits_100_columns_in_a_real_terminal(tmp_path: Path, top: int | None) -> None:
    """``dphhh hhh --pretty`` on the capture, run in a real terminal (tmux, 100 columns): the
    captured screen holds the coverage line and no line is wider than the terminal; with ``--top 5``
    it holds five rows and says so."""
    if shutil.which("tmux") is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "tmux"], check=True, capture_output=True, timeout=600)
    exe = Path(sys.executable).with_name("dphhh")
    assert exe.exists(), exe
    out_file = tmp_path / "screen.txt"
    session = f"dphhh-test-{os.getpid()}"
    more = "" if top is None else f" --top {top}"
    command = f"{exe} hhh --input {SYNACK} --epsilon 1 --delta 1e-6 --tau 500 --seed 3 --pretty{more} 2>/dev/null; tmux -L {session} wait -S {session}-done"
    tmux = ["tmux", "-L", session]  # a server of its own
    subprocess.run(
        [*tmux, "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", "60", "cat"],
        check=True,
        timeout=30,
    )
    try:
        subprocess.run([*tmux, "set-option", "-t", session, "remain-on-exit", "on"], check=True, timeout=30)
        subprocess.run([*tmux, "respawn-pane", "-k", "-t", session, command], check=True, timeout=30)
        subprocess.run([*tmux, "wait", f"{session}-done"], check=True, timeout=120)
        with out_file.open("w") as screen_file:
            subprocess.run(
                [*tmux, "capture-pane", "-p", "-J", "-t", session, "-S", "-200"],
                check=True,
                timeout=30,
                stdout=screen_file,
            )
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
    screen = out_file.read_text()
    assert "coverage: VOID" in screen, screen
    assert max(len(line) for line in screen.splitlines()) <= WIDTH
    rows = [line for line in screen.splitlines() if line.startswith(("  heavy ", "  possible "))]
    if top is not None:
        assert len(rows) == top and f"(the {top} rows with the largest residual of" in screen, screen


# ----------------------------------------------------------------------------- one vocabulary, --format


def test_hhh_and_exact_share_field_names_and_every_format(capsys, tmp_path: Path) -> None:
    path = _ipv4_file(tmp_path)
    private = json.loads(_run(capsys, "hhh", "--input", str(path), *BASE, "--tau", "300")[1])
    exact = json.loads(_run(capsys, "exact", "--input", str(path), "--tau", "300")[1])
    shared = {"prefix", "level", "count", "residual"}
    assert shared <= set(private["hhh"][0]) and shared <= set(exact["hhh"][0])
    assert "estimate" not in private["hhh"][0]
    for command in (["hhh", *BASE], ["exact"]):
        code, out, err = _run(capsys, command[0], "--input", str(path), *command[1:], "--tau", "300", "--format", "csv")
        assert code == 0, err
        rows = list(csv.DictReader(io.StringIO(out)))
        assert rows and shared <= set(rows[0])
        code, out, err = _run(
            capsys, command[0], "--input", str(path), *command[1:], "--tau", "300", "--format", "text"
        )
        assert code == 0 and "10.20.0.0/16" in out, err
    assert "NON-PRIVATE" in _run(capsys, "exact", "--input", str(path), "--tau", "300", "--format", "text")[1]


def test_reports_say_counters_not_kappa(capsys, tmp_path: Path) -> None:
    path = _ipv4_file(tmp_path)
    _, out, _ = _run(capsys, "hhh", "--input", str(path), *BASE, "--tau", "300", "--format", "text")
    assert "counters 1024" in out and "kappa" not in out
    _, out, _ = _run(capsys, "plan", "--n", "1e6", "--epsilon", "1")
    assert "counters" in out and "kappa" not in out


def test_produce_names_kafka_partitions_differently_from_key_partitions() -> None:
    from dphhh.stream.cli import build_parser

    args = build_parser().parse_args(["produce", "--synthetic", "5", "--topic", "t", "--topic-partitions", "3"])
    assert args.topic_partitions == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "--synthetic", "5", "--topic", "t", "--partitions", "3"])


# ----------------------------------------------------------------------------- --tau as a share


def test_tau_as_a_share_of_the_noisy_window(capsys, tmp_path: Path) -> None:
    path = _ipv4_file(tmp_path)
    report = json.loads(_run(capsys, "hhh", "--input", str(path), *BASE, "--tau", "20%")[1])
    n = report["window"]["n_noisy"]
    assert report["params"]["tau_share"] == pytest.approx(0.2)
    assert report["params"]["tau"] == pytest.approx(0.2 * n)
    exact = json.loads(_run(capsys, "exact", "--input", str(path), "--tau", "20%")[1])
    assert exact["params"]["tau"] == pytest.approx(0.2 * exact["n"])
    assert {x["prefix"] for x in exact["hhh"]} >= {"10.20.0.0/16"}


def test_tau_below_one_warns_that_it_is_a_count(capsys, tmp_path: Path) -> None:
    code, _, err = _run(capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), *BASE, "--tau", "0.05")
    assert code == 0
    assert "--tau 0.05 is an absolute count" in err and "--tau 5%" in err


def test_bad_tau_is_a_usage_error(capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["hhh", "--input", str(_ipv4_file(tmp_path)), *BASE, "--tau", "150%"])
    assert exc.value.code == 2
    assert "--tau" in capsys.readouterr().err


# ----------------------------------------------------------------------------- warnings before noise


def test_tiny_epsilon_warns_that_the_output_is_mostly_noise(capsys, tmp_path: Path) -> None:
    code, out, err = _run(
        capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), "--epsilon", "0.01", "--delta", "1e-6", "--tau", "300"
    )
    assert code == 0, err
    assert "mostly noise" in err
    assert "--epsilon" in err and "planner suggests" in err or "no epsilon up to" in err


def test_tau_above_the_window_warns_with_the_share_syntax(capsys, tmp_path: Path) -> None:
    code, out, err = _run(capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), *BASE, "--tau", "1e12")
    assert code == 0, err
    assert "above the window's noisy size" in err and "--tau 5%" in err


def test_sane_settings_draw_no_noise_warning(capsys) -> None:
    code, _, err = _run(capsys, "hhh", "--input", str(SYNACK), *BASE, "--tau", "1800")
    assert code == 0
    assert "mostly noise" not in err and "above the window" not in err


# ----------------------------------------------------------------------------- errors name the option


@pytest.mark.parametrize(
    "args, option",
    [
        (["--epsilon", "-1", "--delta", "1e-6", "--tau", "10"], "--epsilon"),
        (["--epsilon", "1", "--delta", "2", "--tau", "10"], "--delta"),
        (["--epsilon", "1", "--delta", "1e-6", "--tau", "10", "--counters", "0"], "--counters"),
        (["--epsilon", "1", "--delta", "1e-6", "--tau", "10", "--beta", "1.5"], "--beta"),
        (["--epsilon", "1", "--delta", "1e-6", "--tau", "10", "--hierarchy", "ipv4:8,99"], "--hierarchy"),
    ],
)
def test_errors_name_the_option_typed(capsys, tmp_path: Path, args: list[str], option: str) -> None:
    code, _, err = _run(capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), *args)
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert option in line, line
    for internal in ("HHHParams", "PrivacyBudget", "MisraGries", "IPv4Hierarchy"):
        assert internal not in line, line


def test_ipv6_file_with_the_ipv4_hierarchy_gets_a_report_and_no_count(capsys, tmp_path: Path) -> None:
    """Valid IPv6 records in an IPv4 run are somebody's data, excluded: the run releases its (empty)
    report as for any input, and nothing says how many records were left out — not even that some
    were (a hint only follows unparsable records, whose count is public)."""
    path = tmp_path / "ips6.txt"
    path.write_text("\n".join(f"2001:db8::{i:x}" for i in range(3000)) + "\n")
    code, out, err = _run(capsys, "hhh", "--input", str(path), *BASE, "--tau", "100")
    assert code == 0 and json.loads(out)["diagnostics"] == {}
    assert "3000" not in err and "3,000" not in err and "hint:" not in err  # no count of records


def test_an_internal_error_is_not_shown_as_a_usage_error(capsys, monkeypatch, tmp_path: Path) -> None:
    """A bug (here: a plain ValueError from inside the release) prints a traceback and exits 70,
    not the one-line usage error of exit 2."""
    import dphhh.stream.batch as batch

    def broken(*args, **kwargs):
        raise ValueError("an internal inconsistency")

    monkeypatch.setattr(batch, "release_window", broken)
    code, _, err = _run(capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), *BASE, "--tau", "300")
    assert code == 70
    assert "internal error" in err and "Traceback" in err


# ----------------------------------------------------------------------------- stdin and gzip


def test_gzip_and_stdin_inputs_give_the_same_exact_result(capsys, monkeypatch, tmp_path: Path) -> None:
    plain = _ipv4_file(tmp_path)
    packed = tmp_path / "ips.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    want = json.loads(_run(capsys, "exact", "--input", str(plain), "--tau", "300")[1])
    got_gz = json.loads(_run(capsys, "exact", "--input", str(packed), "--tau", "300")[1])
    assert got_gz["n"] == want["n"] and got_gz["hhh"] == want["hhh"]

    class FakeStdin:
        buffer = io.BytesIO(plain.read_bytes())

    monkeypatch.setattr(sys, "stdin", FakeStdin)
    got_stdin = json.loads(_run(capsys, "exact", "--input", "-", "--tau", "300")[1])
    assert got_stdin["n"] == want["n"] and got_stdin["hhh"] == want["hhh"]


def test_a_gzip_capture_through_a_real_pipe(tmp_path: Path) -> None:
    """``gzip -c capture.pcap | dphhh hhh --input -``: the installed command reads a compressed
    capture from a pipe and reports the capture's heavy /8s."""
    packed = tmp_path / "synack.pcap.gz"
    packed.write_bytes(gzip.compress(SYNACK.read_bytes()))
    exe = Path(sys.executable).with_name("dphhh")
    with packed.open("rb") as stdin:
        done = subprocess.run(
            [str(exe), "hhh", "--input", "-", *BASE, "--tau", "1000"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    prefixes = {x["prefix"] for x in json.loads(done.stdout)["hhh"]}
    assert {"107.0.0.0/8", "104.0.0.0/8"} <= prefixes
    assert "dphhh-input-" not in done.stderr  # the spooled copy's name is never shown


def test_pipes_dev_stdin_and_process_substitution_read_like_the_file(tmp_path: Path) -> None:
    """Issue 27 item 7: ``--input <(cat f)`` (``/dev/fd/N``), ``--input /dev/stdin`` and a named pipe
    were refused as "not a regular file". They are read once into a private copy, as ``-`` is; a
    compressed stream is unpacked; a folder is still refused."""
    plain = _ipv4_file(tmp_path)
    exe = Path(sys.executable).with_name("dphhh")
    exact = [str(exe), "exact", "--tau", "300"]
    want = json.loads(subprocess.run([*exact, "--input", str(plain)], capture_output=True, timeout=120).stdout)
    with plain.open("rb") as stdin:
        dev = subprocess.run([*exact, "--input", "/dev/stdin"], stdin=stdin, capture_output=True, timeout=120)
    substituted = subprocess.run(  # bash's process substitution, of a compressed copy
        ["bash", "-c", f'"$0" "${{@:1}}" --input <(gzip -c < "{plain}")', *exact],
        capture_output=True,
        timeout=120,
    )
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["bash", "-c", f'cat "{plain}" > "{fifo}"'])
    named = subprocess.run([*exact, "--input", str(fifo)], capture_output=True, timeout=120)
    writer.wait(timeout=60)
    for done in (dev, substituted, named):
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        assert got["n"] == want["n"] and got["hhh"] == want["hhh"]
    folder = subprocess.run([*exact, "--input", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert folder.returncode == 2 and "not a regular file" in folder.stderr


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("dphhh ")


def test_errors_leave_no_spooled_copy(capsys, tmp_path: Path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    empty = tmp_path / "empty.txt.gz"
    empty.write_bytes(gzip.compress(b""))
    code, out, _ = _run(capsys, "hhh", "--input", str(empty), *BASE, "--tau", "10")
    assert code == 0 and json.loads(out)["schema"].startswith("dphhh.report/")  # an empty input: its report
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(gzip.compress(b"10.1.2.3\n")[:-12])  # cut before its end: an unreadable file
    code, _, err = _run(capsys, "hhh", "--input", str(broken), *BASE, "--tau", "10")
    assert code != 0 and "error" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("dphhh-input-")]


def test_sketches_that_cannot_fit_are_refused_before_the_input_is_read(capsys, tmp_path: Path) -> None:
    """κ × levels × partitions is known before any work: a setting far above --max-memory is
    refused with the estimate and the options that reduce it — before the input is even opened
    (here it does not exist, and the error is still the memory one)."""
    missing = tmp_path / "not-there.txt"
    code, _, err = _run(
        capsys, "hhh", "--input", str(missing), *BASE, "--tau", "10", "--counters", "4000000", "--max-memory", "1GiB"
    )
    assert code == 2
    assert "--counters" in err and "needs ~" in err and "--max-memory" in err and "not found" not in err
    code, _, err = _run(
        capsys, "hhh", "--input", str(_ipv4_file(tmp_path)), *BASE, "--tau", "300", "--max-memory", "1GiB"
    )
    assert code == 0, err


def test_labels_reach_the_terminal_without_control_characters() -> None:
    """A path label is the input's own text: an ANSI escape, a carriage return or a bidirectional
    override in it is printed as an escape (it cannot recolour, overwrite or reorder the terminal's
    text); other characters, non-ASCII letters included, print as they are."""
    from dphhh.stream.cli.output import printable

    assert printable("de/münchen/straße") == "de/münchen/straße"
    assert printable("a\x1b[2Jb\rc\u202ed") == "a\\x1b[2Jb\\rc\\u202ed"
    assert all(ord(c) >= 0x20 for c in printable("".join(map(chr, range(0x20))) + "\x7f\u200f"))


# ----------------------------------------------------------------------------- a top-N list


def _prefixes_in_text(text: str) -> list[str]:
    return [line.split()[2] for line in text.splitlines() if line.startswith(("  heavy ", "  possible "))]


@pytest.mark.parametrize("command", ["hhh", "exact"])
def test_rows_are_a_top_n_list_in_every_format(capsys, command: str) -> None:
    """Issue 27 item 4: text sorted by level then count, JSON/CSV by level then prefix. Now every format
    lists the rows ranked the same way (largest residual first, then count, level, prefix); counts are
    integers; ``--top N`` keeps the first N of that ranking in every format and says how many there were."""
    private = ["--epsilon", "2", "--delta", "1e-6", "--seed", "5"] if command == "hhh" else []
    base = [command, "--input", str(SYNACK), "--tau", "200", *private]
    doc = json.loads(_run(capsys, *base, "--format", "json")[1])
    items = doc["hhh"]
    assert len(items) > 6
    keys = [(-x["residual"], -x["count"], x["level"], x["prefix"]) for x in items]
    assert keys == sorted(keys)
    assert all(isinstance(x["count"], int) and isinstance(x["residual"], int) for x in items)
    ranked_prefixes = [x["prefix"] for x in items]
    assert _prefixes_in_text(_run(capsys, *base, "--format", "text")[1]) == ranked_prefixes
    csv_rows = list(csv.DictReader(io.StringIO(_run(capsys, *base, "--format", "csv")[1])))
    assert [r["prefix"] for r in csv_rows] == ranked_prefixes
    assert all(0 <= float(r["fraction"]) <= 1 for r in csv_rows)
    top = json.loads(_run(capsys, *base, "--format", "json", "--top", "4")[1])
    assert [x["prefix"] for x in top["hhh"]] == ranked_prefixes[:4]
    assert top["shown"] == {"top": 4, "of": len(items)}
    text = _run(capsys, *base, "--format", "text", "--top", "4")[1]
    assert _prefixes_in_text(text) == ranked_prefixes[:4] and f"of {len(items)}: --top" in text
    csv_top = list(csv.DictReader(io.StringIO(_run(capsys, *base, "--format", "csv", "--top", "4")[1])))
    assert [r["prefix"] for r in csv_top] == ranked_prefixes[:4]
