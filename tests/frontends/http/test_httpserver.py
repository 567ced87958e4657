"""The HTTP/1.1 server under KServeHttp and Metrics (_httpserver.py), on raw
sockets: keep-alive, pipelining, chunked bodies both ways, Expect:
100-continue, HEAD, limits on the request head, idle connections, and an
app that fails."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import numpy as np

from frontends import support
from frontends.conftest import Endpoints

from tritonserver.frontends.httpbase.server import MAX_HEAD, HttpServer  # noqa: E402
from tritonserver.frontends._runner import LoopThread, listening_socket  # noqa: E402

INFER = "/v2/models/identity_fp32/infer"


def json_infer(values: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                   "shape": [len(values)], "data": values}]}).encode()


def read_responses(sock: socket.socket, count: int, timeout: float = 10.0) -> list[tuple]:
    """``count`` whole responses from a keep-alive connection."""
    sock.settimeout(timeout)
    data = b""
    out = []
    while len(out) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            status, headers, _ = support.parse_response(data[:head_end + 4])
            if "content-length" in headers:
                end = head_end + 4 + int(headers["content-length"])
                if len(data) >= end:
                    out.append(support.parse_response(data[:end]))
                    data = data[end:]
                    continue
            elif headers.get("transfer-encoding") == "chunked":
                end = data.find(b"\r\n0\r\n\r\n", head_end)  # the last chunk
                if end >= 0:
                    end += 7
                    out.append(support.parse_response(data[:end]))
                    data = data[end:]
                    continue
            else:
                out.append((status, headers, b""))
                data = data[head_end + 4:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return out


def outputs_of(body: bytes) -> list[float]:
    return json.loads(body)["outputs"][0]["data"]


def test_keep_alive_and_pipelining(endpoints: Endpoints):
    """Several requests on one connection, the last three sent in one write:
    answered in order, on the same connection."""
    port = endpoints.http.port
    with socket.create_connection(("127.0.0.1", port)) as s:
        body = json_infer([1.0, 2.0])
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                  % (INFER.encode(), len(body), body))
        [(status, _, data)] = read_responses(s, 1)
        assert status == 200 and outputs_of(data) == [1.0, 2.0]
        batch = b""
        for i in range(3):
            body = json_infer([float(i)])
            batch += b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
                INFER.encode(), len(body), body)
        s.sendall(batch)
        replies = read_responses(s, 3)
        assert [r[0] for r in replies] == [200, 200, 200]
        assert [outputs_of(r[2]) for r in replies] == [[0.0], [1.0], [2.0]]


def test_chunked_request_body_and_expect_continue(endpoints: Endpoints):
    port = endpoints.http.port
    body = json_infer([4.0, 5.0, 6.0])
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                       for part in (body[:10], body[10:30], body[30:])) + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%s"
                  % (INFER.encode(), chunked))
        [(status, _, data)] = read_responses(s, 1)
        assert status == 200 and outputs_of(data) == [4.0, 5.0, 6.0]
        # Expect: 100-continue: the interim answer comes before the body is sent.
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % (INFER.encode(), len(body)))
        s.settimeout(10)
        interim = s.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), interim
        s.sendall(body)
        [(status, _, data)] = read_responses(s, 1)
        assert status == 200 and outputs_of(data) == [4.0, 5.0, 6.0]


def test_streamed_response_is_chunked(endpoints: Endpoints):
    """generate_stream has no length: its events go out chunked."""
    port = endpoints.http.port
    body = b'{"IN": [1, 2, 3]}'
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v2/models/repeat_int32/generate_stream HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        [(status, headers, data)] = read_responses(s, 1)
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert [e["OUT"] for e in support.sse_events(data)] == [1, 2, 3]


def test_head_and_limits_on_the_request_head(endpoints: Endpoints):
    # HEAD: the head of the GET answer (its length too), no body.
    with socket.create_connection(("127.0.0.1", endpoints.metrics.port)) as s:
        s.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        reply = s.recv(65536)
    status, headers, body = support.parse_response(reply)
    assert status == 200 and int(headers["content-length"]) > 0 and body == b"", reply[:300]
    port = endpoints.http.port
    many = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"v" * 1000) for i in range(MAX_HEAD // 1000 + 2))
    reply = support.raw_exchange(port, b"GET /v2 HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert support.parse_response(reply)[0] == 431
    reply = support.raw_exchange(port, b"GET /" + b"a" * (MAX_HEAD + 10) + b" HTTP/1.1\r\n\r\n")
    assert support.parse_response(reply)[0] == 414
    # A request that asks for the connection to close gets it closed.
    reply = support.raw_exchange(port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
                                       b"Connection: close\r\n\r\n")
    status, headers, _ = support.parse_response(reply)
    assert status == 200 and headers.get("connection") == "close"
    assert support.request(port, "GET", "/v2/health/live")[0] == 200


class _Served:
    """An ASGI app on HttpServer in a loop thread of its own."""

    def __init__(self, app, keep_alive_s: float = 75.0):
        self.sock = listening_socket("127.0.0.1", 0, False, "test")
        self.port = self.sock.getsockname()[1]
        self.server = HttpServer(app, self.sock, keep_alive_s=keep_alive_s)
        self.thread = LoopThread("test-http", self.server.serve, self.server.shutdown)
        self.thread.start()

    def stop(self, timeout: float = 1.0) -> bool:
        ended = self.thread.stop(timeout)
        self.sock.close()
        return ended


def test_failing_apps_get_500_and_the_server_goes_on():
    async def app(scope, receive, send):
        if scope["path"] == "/raise":
            raise RuntimeError("the app failed")
        if scope["path"] == "/nothing":
            return  # no response at all
        if scope["path"] == "/half":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"10")]})
            raise RuntimeError("after the head")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"fine"})

    served = _Served(app)
    try:
        for path in ("/raise", "/nothing"):
            status, _, body = support.request(served.port, "GET", path)
            assert status == 500, (path, status, body)
        reply = support.raw_exchange(served.port, b"GET /half HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply == b""  # nothing was sent: the head waits for the body; closed
        status, headers, body = support.request(served.port, "GET", "/ok")
        assert (status, body, headers["content-length"]) == (200, b"fine", "4")
    finally:
        assert served.stop()


def test_idle_and_stalled_connections_are_closed_and_stop_ends_slow_requests():
    started = threading.Event()

    async def app(scope, receive, send):
        if scope["path"] == "/slow":
            started.set()
            await asyncio.sleep(60)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    served = _Served(app, keep_alive_s=0.5)
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            [(status, _, _)] = read_responses(s, 1)
            assert status == 200
            s.settimeout(10)
            start = time.monotonic()
            assert s.recv(1) == b""  # closed by the server once idle
            assert time.monotonic() - start < 5
        # A client that stops inside a request's head, or inside a body the
        # app is waiting for, is closed the same way.
        for stall in (b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Half: ",
                      b"POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"):
            with socket.create_connection(("127.0.0.1", served.port)) as s:
                s.sendall(stall)
                s.settimeout(10)
                start = time.monotonic()
                assert s.recv(65536) == b""
                assert time.monotonic() - start < 5
        outcome: list = []

        def slow() -> None:
            try:
                outcome.append(support.request(served.port, "GET", "/slow", timeout=30)[0])
            except Exception as e:
                outcome.append(type(e).__name__)

        t = threading.Thread(target=slow)
        t.start()
        assert started.wait(10)
    finally:
        start = time.monotonic()
        assert served.stop(timeout=0.5)
    t.join(30)
    assert outcome == [503] and time.monotonic() - start < 5


def test_large_binary_body_round_trip(endpoints: Endpoints):
    """16 MiB in and out: the body is taken in pieces (reading pauses while
    the app has not asked for more) and written in one writev."""
    x = np.arange(4 << 20, dtype=np.float32)
    head = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [x.size],
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
                       }).encode()
    status, headers, data = support.request(
        endpoints.http.port, "POST", INFER, head + x.tobytes(),
        {"Inference-Header-Content-Length": str(len(head))}, timeout=60)
    assert status == 200
    length = int(headers["inference-header-content-length"])
    assert np.array_equal(np.frombuffer(data[length:], np.float32), x)


# ---- Misbehaving clients and apps (each a bug found in review) -------------------------------


def _answer(status: int, body: bytes = b"", extra: list | None = None, more: bool = False):
    async def app(scope, receive, send):
        headers = [(b"content-length", b"%d" % len(body))] if not more else []
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + (extra or [])})
        await send({"type": "http.response.body", "body": body, "more_body": more})
        if more:
            await send({"type": "http.response.body", "body": b""})
    return app


def test_a_body_answered_unread_is_dropped_and_the_connection_goes_on():
    served = _Served(_answer(404, b"no"))
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            body = b"x" * (3 << 20)  # more than is ever read ahead
            s.sendall(b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            s.sendall(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            assert [r[0] for r in read_responses(s, 2)] == [404, 404]
    finally:
        assert served.stop()


def test_a_refusal_with_close_reaches_a_client_still_uploading():
    """An answer that closes (a 413, say) while the body is still coming:
    the rest is read and dropped, so the client gets the answer, not a reset."""
    import http.client

    served = _Served(_answer(413, b"big", [(b"connection", b"close")]))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("POST", "/infer", body=b"z" * (20 << 20))
        response = conn.getresponse()
        assert (response.status, response.read()) == (413, b"big")
        conn.close()
    finally:
        assert served.stop()


def test_one_endless_header_is_refused():
    served = _Served(_answer(200, b"ok"))
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
            sent = 0
            try:
                for _ in range(64):  # 64 MiB, if the server kept taking it
                    s.sendall(b"v" * (1 << 20))
                    sent += 1
            except OSError:
                pass
            assert sent < 8, f"{sent} MiB of one header taken"
    finally:
        assert served.stop()


def test_a_bad_request_after_a_good_one_is_answered_after_it():
    async def app(scope, receive, send):
        await asyncio.sleep(0.2)
        await _answer(200, b"ok")(scope, receive, send)

    served = _Served(app)
    try:
        reply = support.raw_exchange(served.port, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                                                   b"GARBAGE\r\n\r\n")
        first, _, rest = reply.partition(b"ok")
        assert support.parse_response(first + b"ok")[0] == 200, reply
        assert support.parse_response(rest)[0] == 400, reply
    finally:
        assert served.stop()


def test_framing_for_http10_streams_and_204():
    served = _Served(_answer(200, b"abc", more=True))
    try:
        reply = support.raw_exchange(served.port, b"GET / HTTP/1.0\r\n\r\n")
        status, headers, body = support.parse_response(reply)
        assert status == 200 and "transfer-encoding" not in headers and body == b"abc", reply
        assert headers["connection"] == "close"
    finally:
        assert served.stop()
    served = _Served(_answer(204))
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            s.settimeout(10)
            time.sleep(0.3)
            reply = s.recv(65536)
        assert reply == b"HTTP/1.1 204 No Content\r\n\r\n" * 2, reply
    finally:
        assert served.stop()


def test_every_waiting_receive_hears_the_disconnect():
    heard: list = []

    async def app(scope, receive, send):
        await receive()  # the (empty) body
        a, b = asyncio.ensure_future(receive()), asyncio.ensure_future(receive())
        done, _ = await asyncio.wait({a, b}, timeout=10)
        heard.append(sorted(t.result()["type"] for t in done))

    served = _Served(app)
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.3)
        support.wait_until(lambda: heard, what="the app's receives")
        assert heard == [["http.disconnect", "http.disconnect"]]
    finally:
        assert served.stop()


def test_clients_that_do_not_read_are_bounded_and_dropped():
    """Pipelined requests from a client that reads nothing are not answered
    ahead into an ever larger buffer; a stream to such a client, and the
    connection, end after the keep-alive time."""
    big = b"y" * (1 << 20)
    served = _Served(_answer(200, big), keep_alive_s=1.0)
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(2)
            try:
                for _ in range(200):
                    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            except OSError:
                pass
            time.sleep(1.0)
            buffered = [c.transport.get_write_buffer_size() for c in served.server.connections]
            assert all(size < 8 * len(big) for size in buffered), buffered
            support.wait_until(lambda: not served.server.connections, timeout=15,
                               what="the non-reading connection to be dropped")
    finally:
        assert served.stop()
    served = _Served(_answer(200, b"z" * (8 << 20), more=True), keep_alive_s=1.0)
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            support.wait_until(lambda: not served.server.connections, timeout=15,
                               what="the stalled stream to be dropped")
    finally:
        assert served.stop()


def _read_to_close(sock: socket.socket, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_half_closed_clients_get_every_answer(endpoints: Endpoints):
    """A client that sends its requests, then shuts its side for writing (as
    ``nc -N``, some proxies and load balancers do) still reads: each whole
    request is answered, then the server closes. Generated: 1 to 3 pipelined
    requests of varied bodies, health checks among them; 200 connections."""
    port = endpoints.http.port
    rng = np.random.default_rng(5)
    for attempt in range(200):
        sent, expected = b"", []
        for _ in range(int(rng.integers(1, 4))):
            if rng.random() < 0.3:
                sent += b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
                expected.append(None)
            else:
                values = [float(v) for v in rng.integers(-9, 9, int(rng.integers(1, 6)))]
                body = json_infer(values)
                sent += b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
                    INFER.encode(), len(body), body)
                expected.append(values)
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(sent)
            s.shutdown(socket.SHUT_WR)
            data = _read_to_close(s)
        replies = []
        while data:
            head_end = data.index(b"\r\n\r\n") + 4
            _, headers, _ = support.parse_response(data[:head_end])
            end = head_end + int(headers.get("content-length", 0))
            replies.append(support.parse_response(data[:end]))
            data = data[end:]
        assert [r[0] for r in replies] == [200] * len(expected), (attempt, replies)
        for (_, _, body), values in zip(replies, expected):
            if values is not None:
                assert outputs_of(body) == values


def test_a_request_cut_short_by_a_half_close_ends_the_connection(endpoints: Endpoints):
    port = endpoints.http.port
    body = json_infer([1.0, 2.0])
    with socket.create_connection(("127.0.0.1", port)) as s:
        # The body is shorter than its Content-Length: it will never be whole.
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                  % (INFER.encode(), len(body) + 10, body))
        s.shutdown(socket.SHUT_WR)
        _read_to_close(s)  # closed by the server, not left hanging
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        [(status, _, _)] = read_responses(s, 1)
        assert status == 200
