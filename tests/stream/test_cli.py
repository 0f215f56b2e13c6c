"""The batch command line: ``dphhh hhh``, ``dphhh exact`` and ``dphhh demo``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dphhh.stream.cli import main
from dphhh.stream.paths import data_dir

PCAPS = data_dir() / "pcaps"
SYNACK = PCAPS / "amp.TCP.reflection.SYNACK.pcap"
SYNFLOOD = PCAPS / "pkt.TCP.synflood.spoofed.pcap"


def _require(path: Path) -> Path:
    assert path.exists(), f"bundled capture missing: {path} (the repository ships it in data/pcaps)"
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _hhh(capsys, path: Path, *extra: str) -> dict:
    return _hhh_err(capsys, path, *extra)[0]


def _hhh_err(capsys, path: Path, *extra: str) -> tuple[dict, str]:
    code, out, err = _run(capsys, "hhh", "--input", str(path), *extra)
    assert code == 0, err
    return json.loads(out), err


def test_report_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """The batch report has the dphhh.report/2 envelope with params, guarantees, budget and hhh."""
    report, err = _hhh_err(
        capsys, _require(SYNACK), "--epsilon", "1", "--delta", "1e-6", "--tau", "1000", "--seed", "1"
    )
    assert report["schema"] == "dphhh.report/2"
    assert set(report["params"]) == {
        "epsilon",
        "delta",
        "beta",
        "tau",
        "counters",
        "hierarchy",
        "h",
        "variant",
        "mode",
        "partitions",
        "calibration",
    }
    assert {"alpha1", "alpha2", "threshold", "noise_bound"} <= set(report["guarantees"])
    assert isinstance(report["window"]["n_noisy"], int)
    assert report["budget"]["epsilon"] == 1.0
    assert all({"prefix", "level", "residual", "verdict"} <= set(x) for x in report["hhh"])
    # the capture's 4 non-IPv4 packets are valid records of another kind: counted nowhere
    assert report["diagnostics"] == {} and "not_ipv4" not in err and "operational" not in err
    assert "NOT private" in report["guarantees"]["randomness"]


def _exact_prefixes(capsys, path: Path, tau: str, level: int) -> set[str]:
    code, out, _ = _run(capsys, "exact", "--input", str(path), "--tau", tau)
    assert code == 0
    data = json.loads(out)
    assert data["private"] is False and "NON-PRIVATE" in data["warning"]
    return {x["prefix"] for x in data["hhh"] if x["level"] == level}


@pytest.mark.parametrize("epsilon", ["1", "2", "4"])
@pytest.mark.parametrize("variant", ["fresh", "reuse"])
@pytest.mark.parametrize("mode", ["conservative", "point"])
def test_synack_capture_finds_the_exact_large_slash8s(capsys, epsilon: str, variant: str, mode: str) -> None:
    """On the SYN-ACK reflection capture the report contains every /8 that the exact HHH finds at τ = 1000."""
    exact = _exact_prefixes(capsys, _require(SYNACK), "1000", 1)
    assert exact == {"104.0.0.0/8", "107.0.0.0/8", "172.0.0.0/8"}
    for seed in range(5):
        report = _hhh(
            capsys,
            SYNACK,
            "--epsilon",
            epsilon,
            "--delta",
            "1e-6",
            "--tau",
            "1000",
            "--variant",
            variant,
            "--mode",
            mode,
            "--seed",
            str(seed),
        )
        found = {x["prefix"] for x in report["hhh"] if x["level"] == 1}
        assert exact <= found, (seed, found)


@pytest.mark.parametrize("epsilon", ["1", "2", "4"])
@pytest.mark.parametrize("mode", ["conservative", "point"])
def test_spoofed_synflood_reports_nothing_below_the_root(capsys, epsilon: str, mode: str) -> None:
    """On the spoofed SYN flood (no structure) no prefix below the root is reported at τ = 2000."""
    assert _exact_prefixes(capsys, _require(SYNFLOOD), "2000", 1) == set()
    for seed in range(5):
        report = _hhh(
            capsys,
            SYNFLOOD,
            "--epsilon",
            epsilon,
            "--delta",
            "1e-6",
            "--tau",
            "2000",
            "--mode",
            mode,
            "--seed",
            str(seed),
        )
        assert [x["prefix"] for x in report["hhh"]] == ["0.0.0.0/0"]


def test_malformed_lines_are_counted_never_shown(capsys, tmp_path: Path) -> None:
    """Bad text lines are skipped and counted by reason on an operational stderr line, not in the report;
    an IPv6 address (a valid record of another family) is counted nowhere; no content is shown."""
    path = tmp_path / "in.txt"
    path.write_text("10.0.0.1\nCANARY-SECRET-LINE\n10.0.0.2\n999.1.1.1\n2001:db8::1\n# comment\n\n")
    code, out, err = _run(capsys, "hhh", "--input", str(path), "--epsilon", "1", "--delta", "1e-6", "--tau", "50")
    assert code == 0
    assert json.loads(out)["diagnostics"] == {}
    assert "dphhh hhh: operational, not private: 2 unparsable records skipped (bad_ipv4=2)" in err.splitlines()
    assert "wrong_family" not in err and "skipped" not in out
    assert "CANARY" not in out + err and "999.1.1.1" not in out + err and "2001:db8" not in out + err


def test_an_input_without_an_element_gets_its_report_like_one_with_an_element(capsys, tmp_path: Path) -> None:
    """X' (two unparsable lines) and X = X' + one address: both exit 0 with a report of the same shape
    and the same stderr but for the noisy report's warnings (the operational line, its static hint): an error on X' alone would tell
    them apart by the exit status (docs/ALGORITHMS.md §0.1)."""
    runs = []
    for name, extra in (("bad.txt", ""), ("bad-plus-one.txt", "10.1.2.3\n")):
        path = tmp_path / name
        path.write_text("nope\nalso-nope\n" + extra)
        code, out, err = _run(capsys, "hhh", "--input", str(path), "--epsilon", "1", "--delta", "1e-6", "--tau", "5")
        # (warnings are post-processing of the noisy report: they may differ, as its values do)
        # (and the run's own elapsed time, which is the cost of reading the file)
        err = re.sub(r" in \d+\.\d+ s", " in <t> s", err.replace(str(path), "<file>"))
        lines = [line for line in err.splitlines() if ": warning:" not in line]
        runs.append((code, json.loads(out) if code == 0 else out, "\n".join(lines)))
    (code0, report0, err0), (code1, report1, err1) = runs
    assert code0 == code1 == 0 and sorted(report0) == sorted(report1) and report0["diagnostics"] == {}
    assert err0 == err1 and "2 unparsable records skipped" in err0 and "--hierarchy ipv6" in err0
    assert "nope" not in err0 and "no readable" not in err0


@pytest.mark.parametrize(
    "args, word",
    [
        (["--epsilon", "0", "--delta", "1e-6", "--tau", "5"], "epsilon"),
        (["--epsilon", "1", "--delta", "1", "--tau", "5"], "delta"),
        (["--epsilon", "1", "--delta", "1e-6", "--tau", "5", "--counters", "0"], "counters"),
        (["--epsilon", "1", "--delta", "1e-6", "--tau", "5", "--hierarchy", "ipv4:16,8"], "increasing"),
    ],
)
def test_bad_parameters_exit_2_naming_the_field(capsys, tmp_path: Path, args: list[str], word: str) -> None:
    """Invalid parameters are refused with exit status 2 and a message naming the field."""
    path = tmp_path / "in.txt"
    path.write_text("10.0.0.1\n")
    code, out, err = _run(capsys, "hhh", "--input", str(path), *args)
    assert code == 2 and out == "" and word in err


def test_missing_input_file(capsys, tmp_path: Path) -> None:
    """A missing input file is a clear error naming the file."""
    code, _, err = _run(
        capsys, "hhh", "--input", str(tmp_path / "nope.pcap"), "--epsilon", "1", "--delta", "1e-6", "--tau", "5"
    )
    assert code == 2 and "nope.pcap" in err


def test_path_hierarchy_from_text(capsys, tmp_path: Path) -> None:
    """Paths of the wrong depth and malformed paths are skipped; the others are reported by prefix."""
    path = tmp_path / "paths.txt"
    path.write_text("de/bavaria/munich/x\n" * 3000 + "de/berlin\n" + "fr//y/z\n")
    report, err = _hhh_err(
        capsys,
        path,
        "--hierarchy",
        "path:4",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--tau",
        "1000",
        "--mode",
        "point",
        "--seed",
        "3",
    )
    # the malformed path is operational; the path of another depth is a valid record: counted nowhere
    assert report["diagnostics"] == {}
    assert "operational, not private: 1 unparsable record skipped (bad_path_empty_component=1)" in err
    assert "bad_path_depth" not in err
    assert [x["prefix"] for x in report["hhh"]] == ["de/bavaria/munich/x"]


def test_installed_command_runs_the_batch_demo() -> None:
    """The installed ``dphhh demo --batch`` prints a readable private report of the shared capture."""
    _require(SYNACK)
    exe = Path(sys.executable).with_name("dphhh")
    result = subprocess.run(
        [str(exe), "demo", "--batch"], capture_output=True, text=True, timeout=120, env={**os.environ}
    )
    assert result.returncode == 0, result.stderr
    assert "dphhh private HHH report" in result.stdout and "107.0.0.0/8" in result.stdout


def test_produce_without_a_broker_is_a_clear_error(capsys, monkeypatch) -> None:
    """Producing to an address where no broker answers exits 1 with a one-line Kafka error, no traceback."""
    monkeypatch.setattr("dphhh.connectors.kafka_io._BOOTSTRAP_TIMEOUT_S", 2.0)  # the same refusal, found sooner
    code, out, err = _run(capsys, "produce", "--synthetic", "10", "--topic", "t", "--bootstrap", "127.0.0.1:1")
    assert code == 1 and "error: kafka:" in err and "Traceback" not in err


def test_run_refuses_an_unwritable_ledger_or_report_folder_at_start(tmp_path, capsys) -> None:
    """`dphhh run` stops before starting anything when the ledger or report folder cannot be written,
    naming the key (a file where a folder should be)."""
    from dphhh.stream.cli import main

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    assert (
        main(["run", "--set", f"output.ledger_dir={blocker / 'ledger'}", "--set", "kafka.bootstrap=127.0.0.1:1"]) == 2
    )
    assert "config: output.ledger_dir: cannot write to" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "--set",
                f"output.ledger_dir={tmp_path / 'ledger'}",
                "--set",
                f"output.reports_file={blocker / 'r' / 'reports.jsonl'}",
                "--set",
                "kafka.bootstrap=127.0.0.1:1",
            ]
        )
        == 2
    )
    assert "config: output.reports_file: cannot write to" in capsys.readouterr().err
    assert (tmp_path / "ledger").is_dir() and not list((tmp_path / "ledger").iterdir())  # the check leaves nothing


@pytest.mark.parametrize("epsilon", ["5000", "1e300"])
def test_a_huge_epsilon_is_released_with_a_warning_not_a_crash(capsys, epsilon: str) -> None:
    """Issue 27 item 6: ``--epsilon 5000`` on ``hhh`` and ``plan`` ended in an internal error
    (OverflowError, exit 70). Now both run; ``hhh`` warns that the counts are nearly exact, and its
    report is the ordinary one."""
    code, out, err = _run(
        capsys,
        "hhh",
        "--input",
        str(_require(SYNACK)),
        "--epsilon",
        epsilon,
        "--delta",
        "1e-6",
        "--tau",
        "300",
        "--format",
        "json",
        "--seed",
        "3",
    )
    assert code == 0, err
    assert f"epsilon={float(epsilon):g} is above 10" in err and "nearly exact" in err
    report = json.loads(out)
    assert report["params"]["epsilon"] == float(epsilon) and report["hhh"]
    code, out, err = _run(capsys, "plan", "--epsilon", epsilon, "--n", "50k", "--tau", "300")
    assert code == 0, err
    assert "coverage holds" in out


@pytest.mark.parametrize(
    "text, count",
    [
        ("1000", 1000),
        ("1,000", 1000),
        ("12,345,678", 12_345_678),
        ("1k", 1000),
        ("2.5K", 2500),
        ("1M", 10**6),
        ("3e2", 300),
        (" 7 ", 7),
    ],
)
def test_a_count_is_read_as_people_write_it(text: str, count: int) -> None:
    from dphhh.stream.cli.options import parse_count, parse_tau

    assert parse_count(text) == count and parse_tau(text).count == count


@pytest.mark.parametrize("text", ["1,5", "1,0000", "k", "1kk", "1 000", "1.000,5", "0x10"])
def test_what_is_not_a_count_is_refused(text: str) -> None:
    import argparse

    from dphhh.stream.cli.options import parse_count, parse_tau

    with pytest.raises(ValueError):
        parse_count(text)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_tau(text)


def test_tau_and_n_take_thousands_and_suffixes_on_the_command_line(capsys) -> None:
    """Issue 27 item 7: ``--tau 1k`` and ``1,000`` were refused where ``plan --n 50k`` worked."""
    plain = _run(capsys, "exact", "--input", str(_require(SYNACK)), "--tau", "1000", "--format", "json")
    for text in ("1k", "1,000"):
        assert _run(capsys, "exact", "--input", str(SYNACK), "--tau", text, "--format", "json") == plain
    plan = _run(capsys, "plan", "--epsilon", "1", "--n", "50000", "--tau", "1000")
    assert plan[0] == 0 and _run(capsys, "plan", "--epsilon", "1", "--n", "50,000", "--tau", "1k") == plan


def test_whole_counts_take_thousands_and_suffixes_too(capsys) -> None:
    """``--counters 2k`` is ``--counters 2048``'s neighbour ``2000``; a fractional count is refused."""
    assert _run(capsys, "plan", "--epsilon", "1", "--n", "50k", "--tau", "1k", "--counters", "2k") == _run(
        capsys, "plan", "--epsilon", "1", "--n", "50k", "--tau", "1k", "--counters", "2,000"
    )
    with pytest.raises(SystemExit) as refused:  # argparse's refusal
        main(["plan", "--epsilon", "1", "--n", "50k", "--tau", "1k", "--counters", "1.5"])
    assert refused.value.code == 2 and "expected a whole count" in capsys.readouterr().err


def _subparsers(parser) -> dict:
    import argparse

    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def test_every_command_says_what_it_does_in_its_help() -> None:
    """Issue 27 item 8: ``run``, ``produce``, ``reports`` and ``dashboard`` had no description; every
    command (and every snapshot module) has one, and every option of theirs a help text."""
    from dphhh.stream.cli.app import build_parser

    missing = []
    for name, parser in _subparsers(build_parser()).items():
        for sub_name, sub in {name: parser, **{f"{name} {k}": v for k, v in _subparsers(parser).items()}}.items():
            if not (sub.description or "").strip():
                missing.append(f"{sub_name}: no description")
            missing += [
                f"{sub_name}: {a.option_strings[0]} has no help"
                for a in sub._actions
                if a.option_strings and a.help is None
            ]
    assert not missing, missing


def test_exact_says_its_share_is_of_the_exact_n(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["exact", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "share of the input's exact n" in text and "costs no budget" not in text


@pytest.mark.parametrize(
    "argv, command",
    [
        (["hhh", "--input"], "dphhh hhh"),
        (["plan", "--n", "5k"], "dphhh plan"),
        (["nope"], "dphhh"),
        (["snapshot", "hhh", "--epsilon", "x"], "dphhh snapshot hhh"),
    ],
)
def test_an_argument_error_is_one_line_like_every_other_error(capsys, argv: list[str], command: str) -> None:
    """Issue 27 item 8: argparse's errors printed the whole usage (9 lines); now one line, exit 2."""
    with pytest.raises(SystemExit) as refused:
        main(argv)
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert err.count("\n") == 1 and err.startswith(f"{command}: error: ") and f"{command} --help" in err, err
