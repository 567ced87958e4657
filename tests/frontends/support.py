"""What the frontend tests share: raw HTTP calls, server-sent events,
TLS certificates made per run, bounded waits, and figures for the log."""

from __future__ import annotations

import contextlib
import datetime
import http.client
import json
import os
import random
import socket
import time
from typing import Any, Callable, Iterator, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")

# (test, figure) pairs, printed at the end of the session (conftest.py).
FIGURES: list[tuple[str, str]] = []


@contextlib.contextmanager
def client_shm_frontends(server: Any) -> Iterator[tuple[Any, Any]]:
    """KServeHttp and KServeGrpc over ``server`` on free ports, their clients
    allowed to use shared memory (``allow_client_shm``); stopped after."""
    from tritonserver.frontends import KServeGrpc, KServeHttp

    http = KServeHttp(server, KServeHttp.Options(port=0, allow_client_shm=True)).start()
    try:
        grpc = KServeGrpc(server, KServeGrpc.Options(port=0, allow_client_shm=True)).start()
        try:
            yield http, grpc
        finally:
            grpc.stop(timeout=5)
    finally:
        http.stop(timeout=5)


def record(case: str, figure: str) -> None:
    print(f"\n[frontends] {case}: {figure}", flush=True)
    FIGURES.append((case, figure))


def request(port: int, method: str, path: str, body: bytes = b"",
            headers: Optional[dict[str, str]] = None,
            timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request on a fresh connection: (status, lower-case headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes (as much as the server takes: it may answer and close
    early) and read until the server closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (socket.timeout, ConnectionResetError):
            pass
        return b"".join(chunks)


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-case headers, body) of one raw HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    elif headers.get("transfer-encoding") == "chunked":
        out, rest = [], body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out.append(rest[:size])
            rest = rest[size + 2:]
        body = b"".join(out)
    return status, headers, body


def send_request(port: int, method: str, path: str, body: bytes = b"",
                 headers: Optional[dict[str, str]] = None,
                 timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """Like request(), over a raw socket: a server that answers before the
    whole body is sent (and closes) is read all the same."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    reply = raw_exchange(port, raw, timeout=timeout)
    if not reply:
        raise ConnectionError(f"no answer to {method} {path}")
    return parse_response(reply)


def json_error(body: bytes) -> str:
    """The message of Triton's JSON error body ({"error": "..."})."""
    document = json.loads(body)
    assert isinstance(document, dict) and set(document) == {"error"}, document
    assert isinstance(document["error"], str) and document["error"]
    return document["error"]


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON documents of a server-sent event stream."""
    events = []
    for block in body.decode("utf-8").split("\n\n"):
        block = block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block
        events.append(json.loads(block[len("data: "):]))
    return events


def wait_until(condition: Callable[[], bool], timeout: float = 20.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out by itself (outgoing connections,
    binds to port 0)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free on every address now, chosen below the kernel's ephemeral
    range where that leaves room: a port from the range (a bind to port 0)
    can be taken by any process's outgoing connection before the server
    under test binds it (it happened to HAProxy's metrics port, with Ray's
    many connections)."""
    low = _ephemeral_low()
    if low > 11000:
        for _ in range(50):
            port = random.randrange(10000, low)
            with socket.socket() as s:
                try:
                    s.bind(("", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_certificates(folder: str) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a
    client certificate, as PEM files in ``folder``: {name: path}."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(filename: str, data: bytes) -> str:
        path = os.path.join(folder, filename)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def pem_key(k: Any) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    ca_key = key()
    ca = (x509.CertificateBuilder().subject_name(name("tritonserver test CA"))
          .issuer_name(name("tritonserver test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn: str, usage: Any, sans: list[Any]) -> tuple[bytes, bytes]:
        k = key()
        builder = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject)
                   .public_key(k.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), pem_key(k)

    server_cert, server_key = leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [x509.DNSName("localhost"),
                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_cert, client_key = leaf("tritonserver test client", ExtendedKeyUsageOID.CLIENT_AUTH,
                                   [])
    return {
        "ca": write("ca.pem", ca.public_bytes(serialization.Encoding.PEM)),
        "server_cert": write("server.pem", server_cert),
        "server_key": write("server.key", server_key),
        "client_cert": write("client.pem", client_cert),
        "client_key": write("client.key", client_key),
    }


def client_bf16(values: list[float]) -> Any:
    """``values`` (exact in bfloat16) as a numpy array tritonclient takes for BF16:
    ml_dtypes.bfloat16 in its newer releases, float32 in older ones (what pip picks
    for Python 3.9 beside the rest of the test extra). Either way the bytes of the
    array are those of an output holding the same values."""
    import numpy as np
    from tritonclient.utils import triton_to_np_dtype

    return np.array(values, dtype=triton_to_np_dtype("BF16"))
