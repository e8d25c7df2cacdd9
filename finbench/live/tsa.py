"""RFC 3161 time-stamping of a ledger's head (docs/live.md), through ``rfc3161-client`` (the
Sigstore project's client: it builds the request and checks a token's CMS signature, its
chain to a given root, the TSA's ``timeStamping`` key usage, the nonce and the imprint).

A seal asks the TSA to time-stamp the chain head's hex text (SHA-256 imprint, a nonce, the
TSA's certificate in the reply); the token's ``genTime`` is when the TSA saw the head, which
:func:`check_token` reads back after verifying the token against the TSA's root certificate."""

from __future__ import annotations

import base64
import datetime as dt
import urllib.error
import urllib.request

from finbench.core.errors import RunError

CONTENT_TYPE = "application/timestamp-query"


class TsaError(RunError):
    """The TSA could not be reached, or refused to time-stamp."""


def request_token(url: str, message: bytes, *, timeout: float = 30.0) -> bytes:
    """A TSA's DER ``TimeStampResp`` over ``message`` (granted, its nonce and imprint the
    request's: checked here, its signature by :func:`check_token`)."""
    from rfc3161_client import PKIStatus, TimestampRequestBuilder, decode_timestamp_response

    request = TimestampRequestBuilder().data(message).build()
    sent = urllib.request.Request(url, data=request.as_bytes(),
                                  headers={"content-type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as reply:
            der = reply.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise TsaError(f"TSA {url}: no token ({exc})") from exc
    try:
        response = decode_timestamp_response(der)
    except ValueError as exc:
        raise TsaError(f"TSA {url}: its answer is not a TimeStampResp ({exc})") from exc
    if PKIStatus(response.status) not in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS):
        raise TsaError(f"TSA {url}: refused (status {response.status})")
    if response.tst_info.nonce != request.nonce:
        raise TsaError(f"TSA {url}: the token's nonce is not the request's")
    return der


def check_token(der: bytes, message: bytes, root_pem: bytes) -> tuple[dt.datetime | None,
                                                                         str | None]:
    """(the token's time, None) when ``der`` is a valid time-stamp of ``message`` by a TSA
    certified under the root ``root_pem``; else (None, why not)."""
    from cryptography import x509
    from rfc3161_client import VerificationError, VerifierBuilder, decode_timestamp_response

    try:
        response = decode_timestamp_response(der)
        roots = x509.load_pem_x509_certificates(root_pem)
    except ValueError as exc:
        return None, f"cannot be read ({exc})"
    builder = VerifierBuilder()
    for root in roots:
        builder = builder.add_root_certificate(root)
    try:
        builder.build().verify_message(response, message)
    except (VerificationError, ValueError) as exc:
        return None, f"does not verify ({_short(exc)})"
    when = response.tst_info.gen_time
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)), None


def encode(der: bytes) -> str:
    return base64.b64encode(der).decode()


def decode(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


def _short(exc: Exception) -> str:
    """An OpenSSL error stack said in its words, not its structs: the message before the
    stack and the last reason (and data) it gives."""
    import re

    text = str(exc)
    head = text.split(": ErrorStack", 1)[0]
    reasons = re.findall(r'reason: "([^"]+)"', text)
    data = re.findall(r'data: "([^"]+)"', text)
    return head + (f": {reasons[-1]}" if reasons else "") + (f" ({data[-1].strip()})"
                                                              if data else "")
