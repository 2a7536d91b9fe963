"""A small reverse proxy in front of a real Prometheus-API server that lets a query through only with the
credentials and headers it was told to expect: what a Mimir gateway, vmauth or an nginx with basic auth
does in front of a real fleet's TSDB. Optionally over TLS with its own CA, and demanding a client
certificate. Runs on its own event loop in a thread, so subprocess watches and sync tests use it alike.

Also makes the certificates: a CA, a server certificate for 127.0.0.1 it signs, and a client certificate
(``cryptography``), written as PEM files with private keys readable by their owner only.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import PATIENCE_S


@dataclass(frozen=True)
class Certificates:
    """PEM files: the CA, the proxy's certificate and key, a client certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def make_certificates(folder: Path) -> Certificates:
    """A test CA and the two certificates it signs, in ``folder``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        _certificate("tokenwatch test CA", ca_key, None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    issued = {}
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _certificate(f"tokenwatch test {who}", key, ca_cert.subject)
        if who == "server":
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        issued[who] = (builder.sign(ca_key, hashes.SHA256()), key)
    files = Certificates(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
    )
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for who, cert_path, key_path in (
        ("server", files.server_cert, files.server_key),
        ("client", files.client_cert, files.client_key),
    ):
        cert, key = issued[who]
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key))
        key_path.chmod(0o600)
    return files


@dataclass
class AccessProxy:
    """Forwards ``GET`` to ``upstream`` when every header in ``expect`` came with exactly its value
    (else 401); with ``tls`` it serves HTTPS with the server certificate, demanding a client
    certificate the CA signed when ``client_cert_required``. ``passed`` / ``refused`` count queries."""

    upstream: str
    expect: Mapping[str, str]
    tls: Certificates | None = None
    client_cert_required: bool = False
    passed: int = 0
    refused: int = 0
    refused_headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None

    def __enter__(self) -> AccessProxy:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(PATIENCE_S):
            raise RuntimeError("the access proxy did not start")
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._loop is not None
        assert self._thread is not None
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(PATIENCE_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(PATIENCE_S)

    def _serve(self, started: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        started.set()
        self._loop.run_forever()
        self._loop.close()

    def _ssl(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.tls.ca))
        context.load_cert_chain(self.tls.server_cert, self.tls.server_key)
        context.verify_mode = ssl.CERT_REQUIRED if self.client_cert_required else ssl.CERT_NONE
        return context

    async def _start(self) -> None:
        self._client = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._forward)
        app.on_cleanup.append(lambda _app: self._client.close())
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl())
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"

    async def _forward(self, request: web.Request) -> web.Response:
        if any(request.headers.get(name) != value for name, value in self.expect.items()):
            self.refused += 1
            self.refused_headers.append(dict(request.headers))
            return web.Response(status=401, text="unauthorized\n")
        self.passed += 1
        async with self._client.get(self.upstream + request.rel_url.path_qs) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type="application/json")
