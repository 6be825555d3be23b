"""Real HTTP servers on two loopback addresses (127.0.0.1 and 127.0.0.2 are both this machine),
for the tests that a credential never crosses an origin: one may answer every request with a
redirect (any status, to any URL), the other with a Phoenix spans page (GET) or an OTLP export's
success (POST); each records the headers of every request it got. Optionally TLS, with a
certificate made for the test (``tls_files``), which ``SSL_CERT_FILE`` makes the client trust.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

PHOENIX_PAGE: dict[str, Any] = {
    "data": [
        {
            "context": {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"},
            "name": "execute_tool lookup",
            "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
            "status_code": "OK",
        }
    ],
    "next_cursor": None,
}


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class OriginServer:
    """A server at ``host``; ``answer(path)`` gives ``(status, location or None)`` per request (a
    200 serves `PHOENIX_PAGE` to a GET, an empty OTLP answer to a POST). ``seen``: every request's
    method, path and headers (names lowercased)."""

    def __init__(
        self,
        host: str,
        answer: Callable[[str], tuple[int, str | None]],
        *,
        tls: tuple[Path, Path] | None = None,
        reason: str | None = None,
    ) -> None:
        """``reason``: the reason phrase of every answer's status line (None: the status's own)."""
        self.host = host
        self.answer = answer
        self.seen: list[Seen] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._answer(json.dumps(PHOENIX_PAGE).encode(), "application/json")

            def do_POST(self) -> None:
                """An OTLP/HTTP export: an empty ``Export*ServiceResponse`` is a success."""
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer(b"", "application/x-protobuf")

            def _answer(self, page: bytes, content_type: str) -> None:
                outer.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, location = outer.answer(self.path)
                body = page if status == 200 else b""
                self.send_response(status, reason)
                if location is not None:
                    self.send_header("Location", location)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def tls_files(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for the IP address ``host`` and its key (PEM files in
    ``directory``); point ``SSL_CERT_FILE`` at the certificate to make clients trust it."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
