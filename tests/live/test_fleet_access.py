"""A fleet reached the way big fleets' TSDBs are: through a gateway that wants a bearer token or basic
auth and a tenant header (``X-Scope-OrgID``), over TLS with its own CA and a client certificate. A small
reverse proxy (:mod:`access_proxy`) checks each and forwards to a real Prometheus or VictoriaMetrics
scraping three simulated racks; the figures through it are the racks' own. Wrong or missing credentials
and an untrusted certificate are one line; the secret appears in no output, recording, JSONL or report.

Cost: 3 racks of 4 nodes per engine, a few seconds of scraping, three short headless watches.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from access_proxy import AccessProxy, Certificates, make_certificates
from fleet_support import ENGINES, close_all, expected, missing_engine, rack_core, rack_events, serve, tsdb

from tests.conftest import PATIENCE_S, run_tokenwatch, wait_until
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import RACK_FIGURES, Event, RackFiguresBatch
from tokenwatch.base.server_access import SecretFrom, ServerAccess
from tokenwatch.core import RackCore
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.recording import read_events

pytestmark = [pytest.mark.timeout(240)]

RACKS, NODES, HELD_AT_S = 3, 4, 60.0
SECRET = "tw-fleet-secret-91b3e0"
TENANT = {"X-Scope-OrgID": "team-a"}
COL = {name: i for i, name in enumerate(RACK_FIGURES)}


@dataclass
class Engine:
    url: str
    cores: list[RackCore]
    certs: Certificates
    folder: Path


@pytest.fixture(scope="module", params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    reason = missing_engine(request.param)
    if reason is not None:
        pytest.skip(reason)
    cores = [rack_core(rack_events(r, NODES, until_s=HELD_AT_S), HELD_AT_S) for r in range(RACKS)]
    servers = [serve(core) for core in cores]
    folder = tmp_path_factory.mktemp(f"access-{request.param}")
    server = tsdb(request.param, folder, [f"127.0.0.1:{s.port}" for s in servers])
    server.start()
    try:
        server.wait_until_scraped()
        yield Engine(server.url, cores, make_certificates(folder), folder)
    finally:
        server.stop()
        close_all(servers)


def token_file(folder: Path, text: str = SECRET) -> Path:
    path = folder / "fleet.token"
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def full_round(url: str, access: ServerAccess) -> RackFiguresBatch:
    """Discovery, then rounds until one has every rack's figures (a scrape may miss its timeout)."""
    collector = PrometheusFleetCollector(
        FleetSettings(url=url, interval_s=1.0, access=access), now=lambda: 0.0
    )
    found = asyncio.run(collector.discover())
    assert found is not None, collector._said
    assert len(found.nodes) == RACKS * NODES
    collector.node_reader = None
    batch: RackFiguresBatch | None = None

    async def one() -> RackFiguresBatch | None:
        async with PrometheusApi(url, access=access) as api:
            events = await collector.poll(api, time.time() - 0.5)
        return next((e for e in events if isinstance(e, RackFiguresBatch)), None)

    def every_rack() -> bool:
        nonlocal batch
        batch = asyncio.run(one())
        return batch is not None and len(batch.racks) == RACKS and not batch.down.any()

    wait_until(every_rack, "a round with every rack, through the proxy", poll_s=0.5)
    assert batch is not None
    return batch


def test_a_bearer_token_and_a_tenant_header_reach_the_server(engine: Engine) -> None:
    """Every query carries the token (read from its file) and the tenant; the figures through the proxy
    are each rack's own core's."""
    access = ServerAccess(
        headers=tuple(TENANT.items()), bearer=SecretFrom(file=str(token_file(engine.folder)))
    )
    with AccessProxy(engine.url, {"Authorization": f"Bearer {SECRET}", **TENANT}) as proxy:
        batch = full_round(proxy.url, access)
    assert proxy.refused == 0
    assert proxy.passed >= 3
    for r, core in enumerate(engine.cores):
        assert batch.values[r, COL["tokens_per_s"]] == pytest.approx(expected(core).tokens_per_s, rel=1e-12)


def test_basic_auth_over_tls_with_the_fleets_own_ca_and_a_client_certificate(engine: Engine) -> None:
    certs = engine.certs
    access = ServerAccess(
        username="watcher",
        password=SecretFrom(file=str(token_file(engine.folder))),
        ca_file=str(certs.ca),
        cert_file=str(certs.client_cert),
        key_file=str(certs.client_key),
    )
    want = {"Authorization": basic("watcher", SECRET)}
    with AccessProxy(engine.url, want, tls=certs, client_cert_required=True) as proxy:
        assert proxy.url.startswith("https://")
        batch = full_round(proxy.url, access)
    assert proxy.refused == 0
    total = float(np.nansum(batch.values[:, COL["tokens_per_s"]]))
    assert total == pytest.approx(sum(expected(core).tokens_per_s for core in engine.cores), rel=1e-12)


def watch(tmp: Path, fleet_lines: str, password: str = "") -> tuple[int, str, str, list[Path]]:
    """A headless watch of the fleet for a few seconds, recording and writing JSONL (``password`` in
    the environment as FLEET_PASSWORD): its exit status, stdout, stderr and the files it wrote."""
    config = tmp / "fleet.yaml"
    config.write_text(
        f"run: {{name: fleet, scenario: Offline}}\nfleet:\n  interval: 1s\n  lookback: 0s\n{fleet_lines}"
    )
    recording, jsonl = tmp / "fleet-run.jsonl", tmp / "snapshots.jsonl"
    result = run_tokenwatch(
        "watch",
        str(config),
        "--headless",
        "--interval",
        "1s",
        "--stop-after",
        "4s",
        "--record",
        str(recording),
        "--jsonl",
        str(jsonl),
        timeout=PATIENCE_S * 2,
        FLEET_PASSWORD=password,
    )
    return result.returncode, result.stdout, result.stderr, [p for p in (recording, jsonl) if p.exists()]


def test_a_watch_through_the_gateway_never_writes_the_secret(engine: Engine, tmp_path: Path) -> None:
    """``tokenwatch watch`` with the password in a variable and a tenant header, over TLS: it sees the
    racks; the secret (and its base64 in the header) is in none of stdout, stderr, the recording, the
    JSONL or the report made from the recording."""
    certs = engine.certs
    want = {"Authorization": basic("watcher", SECRET), **TENANT}
    with AccessProxy(engine.url, want, tls=certs) as proxy:
        code, out, err, files = watch(
            tmp_path,
            f"  url: {proxy.url}\n  headers: {{X-Scope-OrgID: team-a}}\n"
            f"  auth: {{username: watcher, password_env: FLEET_PASSWORD, ca_file: {certs.ca}}}\n",
            password=SECRET,
        )
    assert code == 0, err
    assert proxy.refused == 0
    assert proxy.passed > 0
    events, _ = read_events(files[0])
    batches = [e for e in events if isinstance(e, RackFiguresBatch) and e.racks]
    assert batches, err
    report = tmp_path / "report.html"
    made = run_tokenwatch("report", str(files[0]), "-o", str(report))
    assert made.returncode == 0, made.stderr
    encoded = want["Authorization"].removeprefix("Basic ")
    written = [out, err, made.stdout, made.stderr, *(p.read_text() for p in [*files, report])]
    assert len(written) == 7
    for text in written:
        assert SECRET not in text
        assert encoded not in text


def test_a_rotated_token_is_read_again_after_a_refused_round(engine: Engine, tmp_path: Path) -> None:
    """The watch's token file still holds the old token when a round is refused; it is rotated then, and
    the next round (a fresh pool) sends the new one."""
    path = token_file(tmp_path, "the-old-token")

    class Rotating(PrometheusFleetCollector):
        async def poll(self, api: PrometheusApi, instant: float) -> list[Event]:
            events = await super().poll(api, instant)
            token_file(tmp_path, SECRET)  # rotated while the watch runs
            return events

    async def ignore(_event: Event) -> None:
        pass

    with AccessProxy(engine.url, {"Authorization": f"Bearer {SECRET}"}) as proxy:
        settings = FleetSettings(
            url=proxy.url, interval_s=1.0, access=ServerAccess(bearer=SecretFrom(str(path)))
        )
        collector = Rotating(settings, now=lambda: 0.0, clock=ManualClock(), polls=2)
        asyncio.run(collector.run(ignore))
    queries_per_round = len(collector.templates)
    assert proxy.refused == queries_per_round  # the first round, with the old token
    assert proxy.passed == queries_per_round  # the second, with the new one
    assert {h["Authorization"] for h in proxy.refused_headers} == {"Bearer the-old-token"}


def test_wrong_credentials_are_one_line_and_the_token_is_not_in_it(engine: Engine, tmp_path: Path) -> None:
    token_file(tmp_path, "not-the-token")
    with AccessProxy(engine.url, {"Authorization": f"Bearer {SECRET}"}) as proxy:
        code, out, err, _ = watch(
            tmp_path, f"  url: {proxy.url}\n  auth: {{bearer_token_file: fleet.token}}\n"
        )
    assert proxy.passed == 0
    assert proxy.refused >= 1
    assert proxy.refused_headers[0]["Authorization"] == "Bearer not-the-token"
    assert code == 1
    first = err.splitlines()[0]
    assert "HTTP 401: the server wants credentials, or refused the ones sent" in first
    assert "not-the-token" not in out + err


def test_an_untrusted_certificate_is_said_and_insecure_skip_verify_is_only_when_asked(
    engine: Engine, tmp_path: Path
) -> None:
    with AccessProxy(engine.url, {}, tls=engine.certs) as proxy:
        (tmp_path / "verified").mkdir()
        (tmp_path / "unverified").mkdir()
        code, _, err, _ = watch(tmp_path / "verified", f"  url: {proxy.url}\n")
        assert code == 1
        assert "TLS certificate is not trusted" in err.splitlines()[0]
        assert "auth.ca_file" in err.splitlines()[0]
        assert proxy.passed == 0
        code, _, err, _ = watch(
            tmp_path / "unverified", f"  url: {proxy.url}\n  auth: {{insecure_skip_verify: true}}\n"
        )
    assert code == 0, err
    assert proxy.passed > 0
