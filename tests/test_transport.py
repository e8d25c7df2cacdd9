"""The aiohttp transport under the ``openai`` client against the client's default transport,
the reference: for every event on a real loopback socket (an answer, gzip, a refused
connection, a connection dropped after the request, an answer too late, a body cut short, a
reply that is no HTTP) the client sends the same request and raises the same error with
the same cause, so the engine retries, stops and reports as it did."""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import ipaddress
import json
import socket
import ssl
import threading
import time

import pytest

from finbench.forecasters.llm import _cannot_connect, tls_context
from finbench.forecasters.transport import AiohttpTransport, environment_proxies

BODY = json.dumps({"choices": [{"message": {"content": "{}"}}]}).encode()


def _answer(body: bytes, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


# what the server does once it has read a request: bytes to send, then how to end
REPLIES = {
    "answer": (_answer(BODY), "keep"),
    "gzip": (_answer(gzip.compress(BODY), "Content-Encoding: gzip"), "keep"),
    "dropped": (b"", "close"),
    "late": (b"", "hang"),
    "idle close": (_answer(BODY), "idle close"),  # closed 0.2 s after its answer
    "cut short": (_answer(BODY)[:-10], "close"),
    "no http": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "close"),
}


class RawServer:
    """A loopback server reading one HTTP request per connection (head and
    Content-Length body) and replying as :data:`REPLIES` says; the requests it read kept."""

    def __init__(self, reply: str, tls: ssl.SSLContext | None = None) -> None:
        self.data, self.end = REPLIES[reply]
        self.tls = tls
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.release = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):  # a client that refused the certificate
                conn.close()
                return
        with conn:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                buffer = buffer[length:]
                conn.sendall(self.data)
                if self.end == "close":
                    return
                if self.end == "idle close":
                    time.sleep(0.2)
                    return
                if self.end == "hang":
                    self.release.wait(10)
                    return

    def close(self) -> None:
        self.release.set()
        self.sock.close()


async def _post(url: str, transport: AiohttpTransport | None, body: bytes):
    """What the engine's call gives: the answer as a dict, or the client's error."""
    import openai
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    client = AsyncOpenAI(api_key="sk-test", base_url=url, timeout=2, max_retries=0,
                         http_client=DefaultAsyncHttpxClient(verify=tls_context(),
                                                             transport=transport))
    try:
        return await client.post("/chat/completions", cast_to=dict, content=body)
    except openai.APIError as exc:
        return exc
    finally:
        await client.close()


def _both(url: str, body: bytes = b'{"model": "m"}') -> tuple:
    """(default transport's outcome, aiohttp's)."""
    return (asyncio.run(_post(url, None, body)),
            asyncio.run(_post(url, AiohttpTransport(tls_context()), body)))


def _request_lines(raw: bytes) -> tuple:
    """A request as a server reads it: its request line, its headers by lower-case name
    (each once, in any order), its body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    first, *headers = head.split(b"\r\n")
    named = sorted((k.strip().lower(), v.strip()) for k, _, v in
                   (line.partition(b":") for line in headers))
    return first, named, body


@pytest.mark.parametrize("reply", ["answer", "gzip"])
def test_an_answer_and_the_request_that_asked_it_are_the_default_transports(reply):
    server = RawServer(reply)
    try:
        theirs, ours = _both(f"http://sk:secret@127.0.0.1:{server.port}/v1",
                             json.dumps({"model": "m", "text": "é" * 3000}).encode())
    finally:
        server.close()
    assert theirs == ours == json.loads(BODY)
    sent = [_request_lines(r) for r in server.requests]
    assert len(sent) == 2
    assert sent[0][0] == sent[1][0] == b"POST /v1/chat/completions HTTP/1.1"
    assert sent[0][2] == sent[1][2]  # the body, byte for byte
    # the same headers, every one: credentials in the URL are the client's Authorization
    # header (here Basic, as the client makes it), once
    assert sent[0][1] == sent[1][1]
    assert [h for h in sent[1][1] if h[0] == b"authorization"] == [
        (b"authorization", b"Basic c2s6c2VjcmV0")]  # sk:secret


@pytest.mark.parametrize("reply", ["dropped", "late", "cut short", "no http"])
def test_a_failed_call_raises_what_the_default_transport_raises(reply):
    server = RawServer(reply)
    try:
        theirs, ours = _both(f"http://127.0.0.1:{server.port}/v1")
    finally:
        server.close()
    assert type(ours) is type(theirs), (reply, theirs, ours)
    assert _cannot_connect(ours) is _cannot_connect(theirs) is False
    expected = "APITimeoutError" if reply == "late" else "APIConnectionError"
    assert type(ours).__name__ == expected


def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    """A provider closes a kept-alive connection once it has been idle a while: the next call
    opens another rather than failing on the closed one (no retry needed: the client here
    makes none)."""
    async def three(transport):
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        client = AsyncOpenAI(api_key="sk-test", base_url=f"http://127.0.0.1:{server.port}/v1",
                             timeout=2, max_retries=0, http_client=DefaultAsyncHttpxClient(
                                 verify=tls_context(), transport=transport))
        got = []
        try:
            for _ in range(3):
                got.append(await client.post("/chat/completions", cast_to=dict, content=b"{}"))
                await asyncio.sleep(0.4)
        finally:
            await client.close()
        return got

    server = RawServer("idle close")
    try:
        assert asyncio.run(three(None)) == [json.loads(BODY)] * 3
        assert asyncio.run(three(AiohttpTransport(tls_context()))) == [json.loads(BODY)] * 3
    finally:
        server.close()
    assert len(server.requests) == 6


def test_a_refused_connection_is_one_that_never_connected():
    """The engine stops a model whose endpoint cannot be reached before any answer: it knows
    the error by its cause, ``ConnectError``, which the client's own aiohttp transport lost
    (it reported a refusal as a connect timeout)."""
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    theirs, ours = _both(f"http://127.0.0.1:{port}/v1")
    assert type(ours) is type(theirs) and type(ours).__name__ == "APIConnectionError"
    assert _cannot_connect(theirs) and _cannot_connect(ours)


@pytest.mark.parametrize("names, expected", [
    ({}, False), ({"NO_PROXY": "localhost"}, False), ({"HTTPS_PROXY": "http://p:3128"}, True),
    ({"http_proxy": "http://p:3128"}, True), ({"ALL_PROXY": "socks5://p:1080"}, True)])
def test_a_proxy_in_the_environment_keeps_the_clients_own_transport(monkeypatch, names,
                                                                   expected):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy",
                 "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in names.items():
        monkeypatch.setenv(name, value)
    assert environment_proxies() is expected


def _authority(tmp_path) -> tuple[str, ssl.SSLContext]:
    """A certificate authority of the test's own (its certificate's file) and a server's TLS
    context holding a certificate it signed for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def certificate(subject, key, issuer, signer, *, ca: bool):
        made = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(days=1))
                .not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            made = made.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        else:
            made = made.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return made.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "finbench test authority")])
    ca = certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    server = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]),
                         key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "server.pem").write_bytes(server.public_bytes(pem) + key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(tmp_path / "server.pem")
    return str(tmp_path / "ca.pem"), served


@pytest.mark.parametrize("trusted", [True, False])
def test_tls_is_verified_against_the_certificates_ssl_cert_file_names(tmp_path, monkeypatch,
                                                                     trusted):
    """An HTTPS endpoint whose certificate an authority named by ``SSL_CERT_FILE`` signed is
    answered on both transports; with the system's authorities alone, both refuse it before
    any request (a connection never made: the engine stops that model)."""
    ca_file, served = _authority(tmp_path)
    if trusted:
        monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    else:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    tls_context.cache_clear()
    server = RawServer("answer", tls=served)
    try:
        theirs, ours = _both(f"https://127.0.0.1:{server.port}/v1")
    finally:
        server.close()
        tls_context.cache_clear()
    if trusted:
        assert theirs == ours == json.loads(BODY)
        assert len(server.requests) == 2
    else:
        assert type(ours) is type(theirs) and type(ours).__name__ == "APIConnectionError"
        assert _cannot_connect(theirs) and _cannot_connect(ours)
        assert not server.requests
