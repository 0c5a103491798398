"""`isp-gateway keys create|list|revoke`, run as a real subprocess in a temp dir."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from isp_gateway.auth.keys import KEY_PATTERN, KeyRing, key_digest
from tests.support import base_env, run_cli


def keys_cli(
    tmp_path: Path, *args: str, keys_file: str | None = "keys.json"
) -> subprocess.CompletedProcess[str]:
    env = base_env() if keys_file is None else base_env(API_KEYS_FILE=keys_file)
    return run_cli("keys", *args, env=env, cwd=tmp_path)


def create(tmp_path: Path, name: str, scopes: str, *extra: str) -> str:
    result = keys_cli(tmp_path, "create", name, "--scopes", scopes, *extra)
    assert result.returncode == 0, result.stderr
    key = result.stdout.strip()
    assert KEY_PATTERN.fullmatch(key), result.stdout
    return key


def test_create_prints_the_key_once_and_stores_only_its_digest(tmp_path: Path) -> None:
    scopes = "clients:read,clients:verify"
    key = create(tmp_path, "whatsapp-bot", scopes, "--rate-per-minute", "120")
    path = tmp_path / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert key not in text
    (entry,) = json.loads(text)["keys"]
    assert entry["name"] == "whatsapp-bot"
    assert entry["sha256"] == key_digest(key)
    assert entry["scopes"] == ["clients:read", "clients:verify"]
    assert entry["rate_per_minute"] == 120
    assert entry["created_at"].endswith("Z")
    # What a running service reads.
    found = KeyRing(path).lookup(key)
    assert found is not None and found.name == "whatsapp-bot"
    # No leftover temporary file beside it; the lock file of CALLERS.md 6 stays (empty).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.json", "keys.json.lock"]


def test_list_shows_names_scopes_rates_and_times_never_digests(tmp_path: Path) -> None:
    first = create(tmp_path, "portal", "plans:read", "--rate-per-minute", "30")
    second = create(tmp_path, "agent", "*")
    result = keys_cli(tmp_path, "list")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for text in ("portal", "plans:read", "30", "agent", "*", "NAME", "CREATED"):
        assert text in out
    for secret in (first, second, key_digest(first), key_digest(second)):
        assert secret not in out
    assert out.count("Z") >= 2  # creation times


def test_list_of_a_file_not_made_yet(tmp_path: Path) -> None:
    result = keys_cli(tmp_path, "list")
    assert result.returncode == 0
    assert "no API keys" in result.stdout
    assert not (tmp_path / "keys.json").exists()


def test_revoke_removes_one_and_keeps_the_mode(tmp_path: Path) -> None:
    kept = create(tmp_path, "kept", "*")
    gone = create(tmp_path, "gone", "*")
    path = tmp_path / "keys.json"
    path.chmod(0o640)  # the operator's choice survives the rewrite
    inode = path.stat().st_ino
    result = keys_cli(tmp_path, "revoke", "gone")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # replaced by a rename, never rewritten in place
    ring = KeyRing(path)
    assert ring.lookup(gone) is None
    assert ring.lookup(kept) is not None
    assert [e["name"] for e in json.loads(path.read_text())["keys"]] == ["kept"]


def test_revoke_of_an_unknown_name_is_refused(tmp_path: Path) -> None:
    create(tmp_path, "bot", "*")
    before = (tmp_path / "keys.json").read_text()
    result = keys_cli(tmp_path, "revoke", "not-there")
    assert result.returncode == 2
    assert "not-there" in result.stderr
    assert (tmp_path / "keys.json").read_text() == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("create", "x", "--scopes", "clients:read,root"), "unknown scope root"),
        (("create", "x", "--scopes", "clients:*"), "unknown scope clients:*"),
        (("create", "x", "--scopes", " , "), "no scope"),
        (("create", "jwt:bot", "--scopes", "*"), "invalid key name"),
        (("create", "x", "--scopes", "*", "--rate-per-minute", "0"), "at least 1"),
    ],
)
def test_bad_create_is_refused_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    result = keys_cli(tmp_path, *args)
    assert result.returncode == 2
    assert says in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "keys.json").exists()


def test_a_duplicate_name_is_refused(tmp_path: Path) -> None:
    first = create(tmp_path, "bot", "*")
    result = keys_cli(tmp_path, "create", "bot", "--scopes", "plans:read")
    assert result.returncode == 2
    assert "already exists" in result.stderr
    assert result.stdout == ""
    ring = KeyRing(tmp_path / "keys.json")
    found = ring.lookup(first)
    assert found is not None and found.scopes == frozenset({"*"})
    assert ring.names() == ["bot"]


def test_unset_setting_is_named(tmp_path: Path) -> None:
    for keys_file in (None, ""):
        result = keys_cli(tmp_path, "list", keys_file=keys_file)
        assert result.returncode == 2
        assert "API_KEYS_FILE is not set" in result.stderr


def test_the_setting_is_read_from_dot_env(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEYS_FILE=from-dotenv.json\n")
    key = create_without_env(tmp_path)
    assert KeyRing(tmp_path / "from-dotenv.json").lookup(key) is not None


def create_without_env(tmp_path: Path) -> str:
    result = run_cli("keys", "create", "bot", "--scopes", "*", env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_broken_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text('{"keys": [ broken')
    result = keys_cli(tmp_path, "create", "bot", "--scopes", "*")
    assert result.returncode == 1
    assert "keys.json" in result.stderr and "nothing changed" in result.stderr
    assert path.read_text() == '{"keys": [ broken'


def test_a_file_in_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    result = keys_cli(tmp_path, "create", "bot", "--scopes", "*", keys_file="no/such/dir/k.json")
    assert result.returncode == 1
    assert "cannot write" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""  # the key is never shown when it was not stored
