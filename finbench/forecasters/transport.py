"""The HTTP transport under the ``openai`` client: aiohttp, with the client's errors.

The client speaks through an ``httpx2`` transport; its default (httpcore and h11, in Python)
costs about 1.1 ms of CPU a call, aiohttp's (its HTTP parser in C) about 0.75 ms. The client
ships an aiohttp transport of its own (``openai.DefaultAioHttpClient``), but it reports every
aiohttp connection error as ``httpx.ConnectTimeout``: a server that refuses the connection,
or drops it after the request, reads as a timeout, and a run could neither stop at an
unreachable endpoint nor say what happened. This one maps each aiohttp error to the
``httpx2`` error the default transport raises for the same event (refused: ``ConnectError``;
dropped: ``RemoteProtocolError``; a read past its timeout: ``ReadTimeout``), so the client
retries and reports exactly as it does on its default transport.

Proxies from the environment (``HTTPS_PROXY`` and the like) are the client's to honour: a
client given a transport of its own ignores them, so where the environment names one the
client keeps its default transport (:func:`client_transport` returns None).
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx2
import yarl

# (aiohttp's error, the httpx2 error of the same event), most specific first
_ERRORS: tuple[tuple[type[BaseException], type[httpx2.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx2.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx2.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx2.ReadTimeout),
    (TimeoutError, httpx2.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx2.ConnectError),  # refused, unresolved, TLS refused
    (aiohttp.ServerDisconnectedError, httpx2.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx2.RemoteProtocolError),  # a body cut short
    (aiohttp.ClientResponseError, httpx2.RemoteProtocolError),  # no HTTP response
    (aiohttp.InvalidURL, httpx2.UnsupportedProtocol),
    (aiohttp.ClientOSError, httpx2.ReadError),  # reset by the peer
    (aiohttp.ClientError, httpx2.NetworkError),
)


def httpx_error(exc: BaseException) -> type[httpx2.TransportError] | None:
    """The ``httpx2`` error for aiohttp's ``exc`` (None: not a transport's error)."""
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours
    return None


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except (aiohttp.ClientError, TimeoutError) as exc:
        ours = httpx_error(exc)
        raise ours(str(exc) or type(exc).__name__) from exc


class _Body(httpx2.AsyncByteStream):
    """A response's body as aiohttp reads it; closing it hands the connection back."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """Requests made by one aiohttp session (opened on the first, in its event loop); ``ssl``:
    the TLS context (the client's, so ``SSL_CERT_FILE`` counts). Connections are not limited
    here: the caller bounds how many requests are in flight."""

    def __init__(self, ssl) -> None:
        self._ssl = ssl
        self._session: aiohttp.ClientSession | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0),
                auto_decompress=False,  # the client decodes what the headers say
                trust_env=False)  # (proxies are the client's: see the module's docstring)
        timeout = request.extensions.get("timeout", {})
        # the URL as the client encoded it, without credentials: the client has made them
        # the request's Authorization header, which aiohttp would refuse beside them
        url = yarl.URL(str(request.url.copy_with(userinfo=b"")), encoded=True)
        with _mapped():
            response = await self._session.request(
                request.method, url, headers=request.headers.multi_items(),
                data=request.content or None, allow_redirects=False,
                server_hostname=request.extensions.get("sni_hostname"),
                timeout=aiohttp.ClientTimeout(sock_connect=timeout.get("connect"),
                                              sock_read=timeout.get("read"),
                                              connect=timeout.get("pool")))
        extensions = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx2.Response(status_code=response.status, headers=response.raw_headers,
                               stream=_Body(response), request=request, extensions=extensions)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def environment_proxies() -> bool:
    """Whether the environment names a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    any case), which the client honours on its default transport alone."""
    return any(scheme != "no" for scheme in urllib.request.getproxies_environment())


def client_transport(ssl) -> AiohttpTransport | None:
    """The transport a client of this process is given: aiohttp, unless the environment
    names a proxy (None: the client's default)."""
    return None if environment_proxies() else AiohttpTransport(ssl)
