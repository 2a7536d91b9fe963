"""The fleet config's ``auth`` and ``headers``: what loads (and what ``tokenwatch check`` says of it,
never a secret), and every mistake as one line naming the file, its line and the key, exit 2: unknown
keys, a secret file missing or readable by every user, a variable not set, a URL that is not http(s) or
carries a token, an inline secret, TLS settings on an http:// URL, a client certificate without its key."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from access_proxy import make_certificates

from tests.conftest import run_tokenwatch
from tokenwatch.base.server_access import SecretFrom
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.fleet_access import server_access

SECRET = "s3cr3t-fleet-token-7f2c"
HEAD = "run: {name: fleet, scenario: Offline}\nfleet:\n"


def write(tmp_path: Path, fleet_lines: str) -> Path:
    config = tmp_path / "fleet.yaml"
    config.write_text(HEAD + fleet_lines)
    return config


def secret_file(tmp_path: Path, name: str = "token", mode: int = 0o600, text: str = SECRET + "\n") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_bearer_token_file_beside_the_config_and_a_tenant_header(tmp_path: Path) -> None:
    """A relative token file is found beside the config (read from another folder); the header and the
    token go out with every query; ``check`` names where the token is, never the token."""
    secret_file(tmp_path)
    config = write(
        tmp_path,
        "  url: https://mimir.example:8080/prometheus\n"
        "  headers: {X-Scope-OrgID: team-a}\n"
        "  auth: {bearer_token_file: token}\n",
    )
    fleet = load_watch_config(config).fleet
    assert fleet is not None
    assert fleet.auth is not None
    assert fleet.auth.bearer_token_file == str(tmp_path / "token")
    sent = server_access(fleet.auth, fleet.headers).request_headers()
    assert sent == {"X-Scope-OrgID": "team-a", "Authorization": f"Bearer {SECRET}"}
    check = run_tokenwatch("check", str(config), cwd=Path("/"))
    assert check.returncode == 0, check.stderr
    assert f"access    bearer token from file {tmp_path / 'token'}, headers X-Scope-OrgID" in check.stdout
    assert SECRET not in check.stdout + check.stderr


def test_basic_auth_with_the_password_from_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path, "  url: http://127.0.0.1:9090\n  auth: {username: watcher, password_env: FLEET_PW}\n"
    )
    check = run_tokenwatch("check", str(config), FLEET_PW=SECRET)
    assert check.returncode == 0, check.stderr
    assert "basic auth as watcher (password from environment variable FLEET_PW)" in check.stdout
    assert SECRET not in check.stdout + check.stderr
    monkeypatch.setenv("FLEET_PW", SECRET)
    fleet = load_watch_config(config).fleet
    assert fleet is not None
    access = server_access(fleet.auth, fleet.headers)
    assert SECRET not in repr(access)  # where the secret is, never the secret
    header = access.request_headers()["Authorization"]
    assert base64.b64decode(header.removeprefix("Basic ")).decode() == f"watcher:{SECRET}"


def test_tls_files_load_and_are_checked(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    config = write(
        tmp_path,
        f"  url: https://127.0.0.1:9443\n  auth:\n    ca_file: {certs.ca}\n"
        f"    cert_file: {certs.client_cert}\n    key_file: {certs.client_key}\n",
    )
    check = run_tokenwatch("check", str(config))
    assert check.returncode == 0, check.stderr
    assert f"CA {certs.ca}, client certificate {certs.client_cert}" in check.stdout


def _mistakes(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(fleet lines, the key the one line names, what it says), with the files they need made."""
    secret_file(tmp_path, "token")
    secret_file(tmp_path, "open-token", mode=0o644)
    secret_file(tmp_path, "empty-token", text="\n")
    certs = make_certificates(tmp_path)
    (tmp_path / "not-a-cert.pem").write_text("hello\n")
    open_key = tmp_path / "open.key"
    open_key.write_bytes(certs.client_key.read_bytes())
    open_key.chmod(0o644)
    http = "  url: http://127.0.0.1:9090\n"
    https = "  url: https://127.0.0.1:9443\n"
    return [
        (http + "  auth: {bearer_token_fil: token}\n", "fleet.auth.bearer_token_fil", "unknown key"),
        (http + "  auth: {bearer_token_file: missing}\n", "fleet.auth.bearer_token_file", "no such file"),
        (http + "  auth: {bearer_token_file: open-token}\n", "fleet.auth.bearer_token_file", "every user"),
        (http + "  auth: {bearer_token_file: empty-token}\n", "fleet.auth.bearer_token_file", "is empty"),
        (http + "  auth: {bearer_token_env: NOT_SET_HERE}\n", "fleet.auth.bearer_token_env", "is not set"),
        (
            http + "  auth: {bearer_token_file: token, bearer_token_env: X}\n",
            "fleet.auth.bearer_token_env",
            "not both",
        ),
        (
            http + "  auth: {bearer_token_file: token, username: u, password_file: token}\n",
            "fleet.auth",
            "a bearer token or basic auth",
        ),
        (
            http + "  auth: {username: watcher}\n",
            "fleet.auth.username",
            "needs password_file or password_env",
        ),
        (http + "  auth: {password_file: token}\n", "fleet.auth.password_file", "needs a username"),
        (http + f"  auth: {{token: {SECRET}}}\n", "fleet.auth.token", "secrets are not accepted"),
        (http + f"  auth: {{password: {SECRET}}}\n", "fleet.auth.password", "secrets are not accepted"),
        (
            http + f"  headers: {{Authorization: 'Bearer {SECRET}'}}\n",
            "fleet.headers.Authorization",
            "secrets are not accepted",
        ),
        (
            http + f"  headers: {{X-Api-Key: {SECRET}}}\n",
            "fleet.headers.X-Api-Key",
            "secrets are not accepted",
        ),
        (http + "  headers: {'X Scope': a}\n", "fleet.headers.X Scope", "not an HTTP header name"),
        (http + f"  auth: {{ca_file: {certs.ca}}}\n", "fleet.auth.ca_file", "only for an https:// URL"),
        (http + "  auth: {insecure_skip_verify: true}\n", "fleet.auth.insecure_skip_verify", "https://"),
        (https + f"  auth: {{ca_file: {tmp_path / 'none.pem'}}}\n", "fleet.auth.ca_file", "no such file"),
        (https + f"  auth: {{ca_file: {tmp_path / 'not-a-cert.pem'}}}\n", "fleet.auth.ca_file", "CA file"),
        (https + f"  auth: {{cert_file: {certs.client_cert}}}\n", "fleet.auth.cert_file", "needs key_file"),
        (
            https + f"  auth: {{cert_file: {certs.client_cert}, key_file: {open_key}}}\n",
            "fleet.auth.key_file",
            "every user",
        ),
        (
            https + f"  auth: {{cert_file: {certs.ca}, key_file: {certs.client_key}}}\n",
            "fleet.auth.cert_file",
            "cannot use client certificate",
        ),
        (f"  url: http://watcher:{SECRET}@127.0.0.1:9090\n", "fleet.url", "credentials are not accepted"),
        (f"  url: http://{SECRET}@127.0.0.1:9090\n", "fleet.url", "credentials are not accepted"),
        (f"  url: 'http://127.0.0.1:9090/?token={SECRET}'\n", "fleet.url", "a query string is not accepted"),
        ("  url: ftp://127.0.0.1:9090\n", "fleet.url", "only http:// and https://"),
        ("  url: http://127.0.0.1:9090\n  tenant: a\n", "fleet.tenant", "unknown key"),
    ]


def test_every_mistake_is_one_line_naming_the_file_and_key_exit_2(tmp_path: Path) -> None:
    """Through ``tokenwatch check`` (and the same load ``watch`` does): exit 2, one line, the config's
    file, line and key, and never the secret the config (or the file it names) holds."""
    for i, (lines, key, said) in enumerate(_mistakes(tmp_path)):
        config = tmp_path / f"fleet{i}.yaml"
        config.write_text(HEAD + lines)
        with pytest.raises(SchemaError) as caught:
            load_watch_config(config)
        message = str(caught.value)
        assert "\n" not in message, message
        assert message.startswith(f"{config}:"), message
        assert f": {key}: " in message, (key, message)
        assert said in message, (said, message)
        assert SECRET not in message, message
    # The CLI: the same line on stderr, exit 2, for check and watch alike (one of each kind suffices).
    for i in (2, 9, 21):
        config = tmp_path / f"fleet{i}.yaml"
        for command in ("check", "watch"):
            result = run_tokenwatch(command, str(config), *(["--headless"] if command == "watch" else []))
            assert result.returncode == 2, (command, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert str(config) in result.stderr
            assert SECRET not in result.stdout + result.stderr


def test_a_secret_read_at_run_time_is_checked_again() -> None:
    """A token file removed after the check is one line when the pool is made, naming the file."""
    problem = SecretFrom(file="/nonexistent/token").problem()
    assert problem == "no such file: /nonexistent/token"
