"""The API key file under concurrent writers and when it cannot be read (CALLERS.md 6).

`keys create` and `keys revoke` run as real processes, each the real CLI (`cli.main`) in a
process of its own; they import first and then wait for a go on stdin, so that their
read-modify-writes start at the same instant (process start-up takes longer than the
whole write, and unsynchronised processes would rarely meet).

An unreadable file is a directory in its place or broken JSON, which root cannot read
either; a mode or owner that refuses the service's user is tried with the command run as
`nobody` (setpriv) when the tests run as root, as the tests' own user otherwise (root reads
a file of mode 0000: os.access says so too)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.auth.keys import KEY_PATTERN, KeyRing, generate_key, new_entry, write_key_entries
from tests.conftest import required_env
from tests.support import base_env, free_port, run_cli

# Runs commands of the real CLI, one per line of stdin, after saying "ready"; answers each
# with one JSON line: its exit code and what it printed.
RUNNER = """
import contextlib, io, json, sys
from isp_gateway.cli import main

print("ready", flush=True)
for line in sys.stdin:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(json.loads(line))
        except SystemExit as exc:
            code = exc.code
    print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


class Runner:
    """One process running CLI commands on cue."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def wait_ready(self) -> None:
        assert self.stdout.readline().strip() == "ready"

    def send(self, *argv: str) -> None:
        self.stdin.write(json.dumps(list(argv)) + "\n")
        self.stdin.flush()

    def result(self) -> dict[str, Any]:
        line = self.stdout.readline()
        assert line, f"the runner exited ({self.proc.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.stdout.close()


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[list[Runner]]:
    """Factory list: append Runner(...) to it; all stopped at the end, each by its own pid."""
    started: list[Runner] = []
    yield started
    for runner in started:
        runner.stop()


def start_runners(started: list[Runner], tmp_path: Path, count: int) -> list[Runner]:
    env = base_env(API_KEYS_FILE="keys.json")
    new = [Runner(tmp_path, env) for _ in range(count)]
    started.extend(new)
    for runner in new:
        runner.wait_ready()
    return new


def at_once(*commands: tuple[Runner, tuple[str, ...]]) -> list[dict[str, Any]]:
    """Each runner's command, all sent before any answer is read."""
    for runner, argv in commands:
        runner.send(*argv)
    return [runner.result() for runner, _ in commands]


def names_in(path: Path) -> list[str]:
    return [entry["name"] for entry in json.loads(path.read_text())["keys"]]


def test_eight_concurrent_creates_keep_eight_keys(tmp_path: Path, runners: list[Runner]) -> None:
    workers = start_runners(runners, tmp_path, 8)
    answers = at_once(
        *((w, ("keys", "create", f"bot-{n}", "--scopes", "*")) for n, w in enumerate(workers))
    )
    assert [a["code"] for a in answers] == [0] * 8, answers
    path = tmp_path / "keys.json"
    assert sorted(names_in(path)) == [f"bot-{n}" for n in range(8)]
    ring = KeyRing(path)
    for n, answer in enumerate(answers):
        key = answer["out"].strip()
        assert KEY_PATTERN.fullmatch(key)
        found = ring.lookup(key)
        assert found is not None and found.name == f"bot-{n}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # No temporary file left behind; the (empty) lock file stays, mode 0600.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.json", "keys.json.lock"]
    assert stat.S_IMODE((tmp_path / "keys.json.lock").stat().st_mode) == 0o600


def test_a_revoked_key_never_comes_back(tmp_path: Path, runners: list[Runner]) -> None:
    revoker, creator, bystander = start_runners(runners, tmp_path, 3)
    rounds = 50
    first = creator
    first.send("keys", "create", "victim-0", "--scopes", "*")
    victims = [first.result()["out"].strip()]
    for n in range(rounds):
        # Round n: victim n is revoked while victim n+1 and a bystander are created.
        revoked, created, other = at_once(
            (revoker, ("keys", "revoke", f"victim-{n}")),
            (creator, ("keys", "create", f"victim-{n + 1}", "--scopes", "*")),
            (bystander, ("keys", "create", f"bystander-{n}", "--scopes", "plans:read")),
        )
        # A revoke that found no victim n means its creation was lost.
        assert [revoked["code"], created["code"], other["code"]] == [0, 0, 0], (n, revoked)
        victims.append(created["out"].strip())
    path = tmp_path / "keys.json"
    assert sorted(names_in(path)) == sorted(
        [f"victim-{rounds}", *(f"bystander-{n}" for n in range(rounds))]
    )
    ring = KeyRing(path)
    assert [ring.lookup(key) is not None for key in victims] == [False] * rounds + [True]


# -- a file the service cannot read ------------------------------------------------------------


def broken_json(path: Path) -> None:
    path.write_text('{"keys": [')


def directory_in_its_place(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("breaks", [broken_json, directory_in_its_place])
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_start_up_refuses_a_key_file_it_cannot_read(
    tmp_path: Path, password_hash: str, breaks: Any, command: str
) -> None:
    path = tmp_path / "keys.json"
    breaks(path)
    env = base_env(**required_env(password_hash), API_KEYS_FILE=str(path))
    args = ["serve", "--port", str(free_port())] if command == "serve" else [command]
    result = run_cli(*args, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"isp-gateway: API_KEYS_FILE {path}: "), line
    assert "Traceback" not in result.stderr
    assert "configuration OK" not in result.stdout


def test_check_config_accepts_a_key_file_not_made_yet_and_a_good_one(
    tmp_path: Path, password_hash: str
) -> None:
    path = tmp_path / "keys.json"
    env = base_env(**required_env(password_hash), API_KEYS_FILE=str(path))
    assert run_cli("check-config", env=env, cwd=tmp_path).returncode == 0
    write_key_entries(path, [new_entry(generate_key(), "bot", ["*"], None)])
    result = run_cli("check-config", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "configuration OK" in result.stdout


# With the tests run as root, a mode or an owner that refuses a user is tried as `nobody`.
AS_ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
NOBODY = 65534


def as_service_user(args: list[str]) -> list[str]:
    if not AS_ROOT:
        return args
    if SETPRIV is None:
        pytest.skip("running as root without setpriv: no user a file mode can refuse")
    command = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if not _runs_as_nobody(tuple(command)):
        # A checkout under a directory only root may enter (`mktemp -d` makes one 0700).
        pytest.skip(
            f"needs the checkout readable by user nobody (uid {NOBODY}), to run the gateway "
            f"as a user a file mode can refuse: clone it where others may enter "
            f"({sys.prefix} is not)"
        )
    return [*command, *args]


@functools.cache
def _runs_as_nobody(command: tuple[str, ...]) -> bool:
    """Whether `nobody` can run this checkout's Python and import the gateway."""
    probe = [*command, sys.executable, "-c", "import isp_gateway"]
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's own temporary directories are root's
    only), removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="igw-keys-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def refused_by_mode(path: Path) -> None:
    """Make `path` unreadable to the service's user: mode 0000 when we are that user; as
    root, owned by root with mode 0600 (nobody may read it)."""
    path.chmod(0o600 if AS_ROOT else 0o000)


@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_start_up_refuses_a_key_file_its_user_may_not_read(
    open_dir: Path, password_hash: str, command: str
) -> None:
    path = open_dir / "keys.json"
    write_key_entries(path, [new_entry(generate_key(), "bot", ["*"], None)])
    refused_by_mode(path)
    args = [sys.executable, "-m", "isp_gateway", command]
    if command == "serve":
        args += ["--port", str(free_port())]
    env = base_env(**required_env(password_hash), API_KEYS_FILE=str(path))
    result = subprocess.run(
        as_service_user(args), env=env, cwd=open_dir, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"isp-gateway: API_KEYS_FILE {path}: cannot be read"), line
    assert "PermissionError" in line


# The running service's side: a ring (as the service's user) whose file becomes unreadable
# by a chmod alone (no new content: only its ctime says so).
RING = """
import sys
from pathlib import Path
from isp_gateway.auth.keys import KeyRing
ring = KeyRing(Path(sys.argv[1]), check_interval=0)
key = sys.argv[2]
print(ring.status(), ring.lookup(key) is not None, flush=True)
sys.stdin.readline()
print(ring.status(), ring.lookup(key) is not None, flush=True)
"""


def test_a_running_ring_sees_a_mode_that_refuses_it_and_keeps_its_keys(open_dir: Path) -> None:
    path = open_dir / "keys.json"
    key = generate_key()
    write_key_entries(path, [new_entry(key, "bot", ["*"], None)])
    path.chmod(0o644)
    proc = subprocess.Popen(
        as_service_user([sys.executable, "-c", RING, str(path), key]),
        cwd=open_dir,
        env=base_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().split() == ["ok", "True"]
        refused_by_mode(path)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().split() == ["unreadable", "True"]
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert err.count("keeping the 1 keys read before") == 1, err
    assert str(path) in err and "PermissionError" in err


@pytest.mark.skipif(not AS_ROOT, reason="only root may give a file to another user")
def test_root_keeps_the_files_owner(tmp_path: Path) -> None:
    # An operator running `keys create` with sudo must not leave the service a file it
    # cannot read: the new file keeps the old one's owner, group and mode.
    path = tmp_path / "keys.json"
    write_key_entries(path, [new_entry(generate_key(), "bot", ["*"], None)])
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o640)
    result = run_cli(
        "keys",
        "create",
        "portal",
        "--scopes",
        "plans:read",
        env=base_env(API_KEYS_FILE="keys.json"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o640)
    assert "warning" not in result.stderr
    assert sorted(names_in(path)) == ["bot", "portal"]
