"""Safe by default, over the network: client shared memory off in every
frontend and in ``serve`` (Triton 2.69's ``--allow-client-shm``), and HTTPS on
``serve``'s HTTP and metrics ports with certificates made by the test."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import textwrap
import urllib.request
import uuid
from typing import Any, Iterator

import numpy as np
import pytest

import tritonserver

pytest.importorskip("fastapi")
pytest.importorskip("tritonclient.grpc")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from frontends import support  # noqa: E402
from frontends.serve_process import Serve  # noqa: E402
from tritonserver.frontends import KServeGrpc, KServeHttp, Metrics  # noqa: E402

DISABLED = ("Client shared memory is disabled. Start the server with "
            "'--allow-client-shm=true' to enable.")
SECRET = np.array([3.5, -1.25, 42.0, 7.0], dtype=np.float32)  # the other process's 16 bytes
pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")


# ---- Another process's memory ----------------------------------------------------------


@pytest.fixture
def victim() -> Iterator[str]:
    """A second process holding a POSIX shared memory segment of 16 bytes of
    its own data; yields the segment's key (as shm_open names it)."""
    name = f"tritonserver-victim-{uuid.uuid4().hex[:12]}"
    code = textwrap.dedent(f"""
        import sys
        from multiprocessing import resource_tracker, shared_memory
        segment = shared_memory.SharedMemory(name={name!r}, create=True, size=16)
        resource_tracker.unregister(segment._name, "shared_memory")
        segment.buf[:16] = bytes.fromhex({SECRET.tobytes().hex()!r})
        print("ready", flush=True)
        sys.stdin.read()  # until the test ends
        segment.close()
        segment.unlink()
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield "/" + name
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(30)


def _register_body(key: str) -> bytes:
    return json.dumps({"key": key, "offset": 0, "byte_size": 16}).encode()


def _infer_body(region: str) -> bytes:
    return json.dumps({"inputs": [{
        "name": "INPUT0", "datatype": "FP32", "shape": [4],
        "parameters": {"shared_memory_region": region, "shared_memory_byte_size": 16}}]}
    ).encode()


def _refused_over_http(port: int, key: str) -> None:
    """The issue's reproduction over HTTP: registering the other process's
    segment, unregistering and naming a region in an inference are refused
    with Triton's status and text; status stays readable (and empty)."""
    for method, path, body in (
            ("POST", "/v2/systemsharedmemory/region/stolen/register", _register_body(key)),
            ("POST", "/v2/systemsharedmemory/region/stolen/unregister", b""),
            ("POST", "/v2/systemsharedmemory/unregister", b""),
            ("POST", "/v2/cudasharedmemory/region/stolen/register", b"{}"),
            ("POST", "/v2/models/identity_fp32/infer", _infer_body("stolen"))):
        status, _, data = support.request(port, method, path, body)
        assert status == 501 and json.loads(data) == {"error": DISABLED}, (path, status, data)
    status, _, data = support.request(port, "GET", "/v2/systemsharedmemory/status")
    assert status == 200 and json.loads(data) == []


def _refused_over_grpc(url: str, key: str) -> None:
    client = grpcclient.InferenceServerClient(url)
    try:
        for call in (lambda: client.register_system_shared_memory("stolen", key, 16),
                     lambda: client.unregister_system_shared_memory("stolen"),
                     lambda: client.unregister_system_shared_memory()):
            with pytest.raises(InferenceServerException) as caught:
                call()
            assert DISABLED in str(caught.value)
            assert caught.value.status() == "StatusCode.UNIMPLEMENTED"
        inp = grpcclient.InferInput("INPUT0", [4], "FP32")
        inp.set_shared_memory("stolen", 16)
        with pytest.raises(InferenceServerException, match="Client shared memory is disabled"):
            client.infer("identity_fp32", [inp])
        assert len(client.get_system_shared_memory_status().regions) == 0
        assert client.is_server_live()
    finally:
        client.close()


def test_clients_cannot_register_or_use_shared_memory_by_default(endpoints, victim):
    """KServeHttp and KServeGrpc with their default options refuse a client
    that registers another process's segment (it would read and write that
    process's memory) and any inference naming a region."""
    _refused_over_http(endpoints.http.port, victim)
    _refused_over_grpc(endpoints.grpc_url, victim)
    assert endpoints.http.options.allow_client_shm is False
    assert endpoints.grpc.options.allow_client_shm is False


def test_regions_the_program_registered_stay_its_own(frontend_server, victim):
    """A region the program registered in-process (its own decision) is
    not for network clients of a frontend that does not allow them."""
    frontend_server.register_system_shared_memory("mine", victim, 16)
    http = KServeHttp(frontend_server, KServeHttp.Options(port=0)).start()
    grpc_frontend = KServeGrpc(frontend_server, KServeGrpc.Options(port=0)).start()
    try:
        status, _, data = support.request(http.port, "POST", "/v2/models/identity_fp32/infer",
                                          _infer_body("mine"))
        assert status == 501 and DISABLED in data.decode(), data
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_frontend.port}")
        try:
            inp = grpcclient.InferInput("INPUT0", [4], "FP32")
            inp.set_shared_memory("mine", 16)
            with pytest.raises(InferenceServerException, match="shared memory is disabled"):
                client.infer("identity_fp32", [inp])
        finally:
            client.close()
        # The program itself still reads its region.
        tensor = frontend_server.system_shared_memory_tensor("mine", "FP32", [4])
        out = next(frontend_server.model("identity_fp32").infer(inputs={"INPUT0": tensor}))
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), SECRET)
    finally:
        http.stop(timeout=5)
        grpc_frontend.stop(timeout=5)
        frontend_server.unregister_system_shared_memory("mine")


def _serve_flags(*extra: str) -> list[str]:
    return ["--model-repository", tritonserver.example_model_repository(),
            "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
            "--log-info", "false", "--exit-timeout-secs", "10", *extra]


def test_serve_refuses_client_shm_unless_allowed(victim):
    """The reproduction against ``serve`` on its defaults gets Triton's
    refusal over both protocols; ``--allow-client-shm=true`` restores the
    extension (the reply then carries the segment's bytes, as Triton's)."""
    serve = Serve(*_serve_flags())
    try:
        serve.wait_ready()
        _refused_over_http(serve.ports["HTTPService"], victim)
        _refused_over_grpc(f"127.0.0.1:{serve.ports['GRPCInferenceService']}", victim)
    finally:
        serve.end()
    serve = Serve(*_serve_flags("--allow-client-shm=true"))
    try:
        serve.wait_ready()
        port = serve.ports["HTTPService"]
        status, _, data = support.request(
            port, "POST", "/v2/systemsharedmemory/region/granted/register", _register_body(victim))
        assert status == 200, data
        status, _, data = support.request(port, "POST", "/v2/models/identity_fp32/infer",
                                          json.dumps({"inputs": [{
                                              "name": "INPUT0", "datatype": "FP32", "shape": [4],
                                              "parameters": {
                                                  "shared_memory_region": "granted",
                                                  "shared_memory_byte_size": 16}}],
                                              "outputs": [{"name": "OUTPUT0",
                                                           "parameters": {"binary_data": False}}]}
                                          ).encode())
        assert status == 200, data
        assert json.loads(data)["outputs"][0]["data"] == SECRET.tolist()
    finally:
        serve.end()


# ---- HTTPS --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: Any) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 signed by it, a client
    certificate signed by it and one that is not (PEM files)."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.timezone.utc)

    def make(name: str, issuer: Any = None, server: bool = False, ca: bool = False) -> Any:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject)
                   .issuer_name(issuer[0].subject if issuer else subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        elif not ca:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
        (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (folder / f"{name}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return cert, key

    ca = make("ca", ca=True)
    make("server", issuer=ca, server=True)
    make("client", issuer=ca)
    make("stranger")  # self-signed: not by the CA
    return {name: str(folder / name) for name in ("ca", "server", "client", "stranger")}


def _https_client(port: int, certs: dict[str, str], client: str = "") -> Any:
    options = {"ca_certs": certs["ca"] + ".pem"}
    if client:
        options.update(certfile=certs[client] + ".pem", keyfile=certs[client] + ".key")
    return httpclient.InferenceServerClient(f"127.0.0.1:{port}", ssl=True, ssl_options=options)


def _infer_over(client: Any) -> None:
    x = np.arange(8, dtype=np.float32)
    inp = httpclient.InferInput("INPUT0", [8], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_array_equal(client.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), x)


def _tls_context(certs: dict[str, str], client: str = "") -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs["ca"] + ".pem")
    if client:
        context.load_cert_chain(certs[client] + ".pem", certs[client] + ".key")
    return context


def test_https_serves_tritonclient_and_metrics(frontend_server, certificates):
    tls = {"ssl_certfile": certificates["server"] + ".pem",
           "ssl_keyfile": certificates["server"] + ".key"}
    http = KServeHttp(frontend_server, KServeHttp.Options(port=0, **tls)).start()
    metrics = Metrics(frontend_server, Metrics.Options(port=0, **tls)).start()
    try:
        client = _https_client(http.port, certificates)
        try:
            assert client.is_server_live()
            _infer_over(client)
        finally:
            client.close()
        # Plain HTTP to the TLS port gets no answer a client could read.
        with pytest.raises(Exception):
            support.request(http.port, "GET", "/v2/health/live", timeout=5)
        assert metrics.url.startswith("https://")
        with urllib.request.urlopen(metrics.url, context=_tls_context(certificates),
                                    timeout=30) as reply:
            assert b"nv_inference_count" in reply.read()
    finally:
        http.stop(timeout=5)
        metrics.stop(timeout=5)


def test_https_client_certificates_are_checked(frontend_server, certificates):
    """With ``ssl_ca_certs``, a client certificate signed by that CA is
    required: none, or one from elsewhere, fails the handshake."""
    http = KServeHttp(frontend_server, KServeHttp.Options(
        port=0, ssl_certfile=certificates["server"] + ".pem",
        ssl_keyfile=certificates["server"] + ".key",
        ssl_ca_certs=certificates["ca"] + ".pem")).start()
    url = f"https://127.0.0.1:{http.port}/v2/health/live"
    try:
        with urllib.request.urlopen(url, context=_tls_context(certificates, "client"),
                                    timeout=30) as reply:
            assert reply.status == 200
        for who in ("", "stranger"):
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with urllib.request.urlopen(url, context=_tls_context(certificates, who),
                                            timeout=30) as reply:
                    reply.read()
        client = _https_client(http.port, certificates, client="client")
        try:
            _infer_over(client)
        finally:
            client.close()
    finally:
        http.stop(timeout=5)


@pytest.mark.parametrize("options,expected", [
    ({"ssl_certfile": "/no/such/cert.pem"}, "cannot use the TLS files"),
    ({"ssl_keyfile": "key.pem"}, "TLS settings need ssl_certfile"),
    ({"ssl_certfile": "x.pem", "ssl_cert_reqs": "sometimes"}, "ssl_cert_reqs"),
    ({"ssl_certfile": "x.pem", "ssl_cert_reqs": "required"}, "needs ssl_ca_certs"),
    ({"ssl_certfile": 3}, "expected a path"),
])
def test_tls_settings_that_cannot_work_are_refused_at_construction(frontend_server, options,
                                                                   expected):
    for frontend in (KServeHttp, Metrics):
        with pytest.raises(tritonserver.InvalidArgumentError, match=expected):
            frontend(frontend_server, frontend.Options(port=0, **options))


def test_serve_https_flags(certificates):
    serve = Serve(*_serve_flags("--http-ssl-certfile", certificates["server"] + ".pem",
                                "--http-ssl-keyfile", certificates["server"] + ".key"))
    try:
        serve.wait_ready()
        assert "(HTTPS)" in serve.output()
        client = _https_client(serve.ports["HTTPService"], certificates)
        try:
            _infer_over(client)
        finally:
            client.close()
        url = f"https://127.0.0.1:{serve.ports['Metrics Service']}/metrics"
        with urllib.request.urlopen(url, context=_tls_context(certificates), timeout=30) as r:
            assert r.status == 200
    finally:
        serve.end()
