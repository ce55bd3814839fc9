"""The sandbox for agent-written code: limits, isolation and output capping."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from skillgrad.sandbox import SandboxLimits, run_python

FAST = SandboxLimits(timeout_s=2.0, cpu_s=1, memory_mb=512, max_output_chars=300)


def test_runs_code_in_the_given_folder_and_returns_its_output(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello")
    result = run_python("import os\nprint(os.getcwd())\nprint(open('data.txt').read())\n"
                        "open('out.txt', 'w').write('made')", tmp_path, FAST)
    assert result.returncode == 0 and not result.timed_out
    assert result.output.splitlines() == [str(tmp_path.resolve()), "hello"]
    assert (tmp_path / "out.txt").read_text() == "made"
    assert result.summary().endswith("(exit code 0)")


def test_environment_variables_of_the_parent_are_not_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = run_python("import os, json; print(json.dumps(sorted(os.environ)))", tmp_path, FAST)
    assert "OPENAI_API_KEY" not in result.output and "sk-secret" not in result.output
    assert result.output.strip() == '["HOME", "LANG", "PATH"]'


@pytest.mark.parametrize("code", [
    "import socket\ns = socket.socket()\nprint('created')",
    "import _socket\ns = _socket.socket()\nprint('created')",
    "import socket\nsocket.create_connection(('127.0.0.1', 9))\nprint('created')",
    "import socket\nsocket.getaddrinfo('localhost', 80)\nprint('created')",
])
def test_network_is_blocked(tmp_path: Path, code: str) -> None:
    result = run_python(code, tmp_path, FAST)
    assert result.returncode != 0 and "created" not in result.output
    assert "network access is disabled" in result.output


def test_wall_clock_timeout_kills_the_process_group(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "open('child.pid', 'w').write(str(child.pid))\n"
            "time.sleep(60)")
    started = time.monotonic()
    result = run_python(code, tmp_path, SandboxLimits(timeout_s=1.5, cpu_s=5))
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - started < 10
    assert "wall-clock timeout" in result.summary()
    child = int((tmp_path / "child.pid").read_text())
    time.sleep(0.2)
    assert not _alive(child)  # the grandchild died with the group


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cpu_limit_stops_a_busy_loop(tmp_path: Path) -> None:
    result = run_python("while True:\n    pass", tmp_path,
                        SandboxLimits(timeout_s=20, cpu_s=1))
    assert not result.timed_out and result.returncode is not None and result.returncode < 0
    assert "killed by signal" in result.summary()


def test_memory_limit(tmp_path: Path) -> None:
    result = run_python("x = bytearray(2 * 1024 ** 3)\nprint('allocated')", tmp_path, FAST)
    assert result.returncode != 0 and "allocated" not in result.output
    assert "MemoryError" in result.output


def test_output_is_truncated_keeping_its_start_and_end(tmp_path: Path) -> None:
    result = run_python("print('start' + 'x' * 100000)\nraise SystemExit('the end')", tmp_path,
                        FAST)
    assert result.truncated and len(result.output) == 300
    assert result.output.startswith("start") and result.output.rstrip().endswith("the end")
    assert "[... output truncated ...]" in result.summary()
    short = run_python("print('y' * 200)", tmp_path, FAST)
    assert not short.truncated and short.output.strip() == "y" * 200


def test_errors_in_the_code_are_reported_not_raised(tmp_path: Path) -> None:
    result = run_python("raise ValueError('bad input')", tmp_path, FAST)
    assert result.returncode == 1 and "ValueError: bad input" in result.output
