"""A loopback RFC 3161 time-stamping authority for the tests: its own CA (``cryptography``),
a TSA certificate with the critical ``timeStamping`` extended key usage, and an HTTP
endpoint answering ``application/timestamp-query`` with a ``TimeStampResp`` whose token is a
CMS SignedData over the TSTInfo (``asn1crypto`` encodes them), signed RSA/SHA-256 with the
signed attributes RFC 3161 and RFC 5816 ask for. ``clock``: where its genTime comes from (the
tests' fake clock), so a seal's time is the schedule's."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from asn1crypto import algos, cms, core, tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

POLICY = "1.3.6.1.4.1.55555.1.1"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca(now: dt.datetime):
    """(CA key, CA certificate, TSA key, TSA certificate), valid from 2000 to ten years from
    now (a test's fake clock may stamp any time in between)."""
    start, end = dt.datetime(2000, 1, 1, tzinfo=dt.UTC), now + dt.timedelta(days=3650)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (x509.CertificateBuilder().subject_name(_name("FinBench test root"))
          .issuer_name(_name("FinBench test root")).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    tsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tsa = (x509.CertificateBuilder().subject_name(_name("FinBench test TSA"))
           .issuer_name(ca.subject).public_key(tsa_key.public_key()).serial_number(2)
           .not_valid_before(start).not_valid_after(end)
           .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
           .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True,
                                        key_encipherment=False, data_encipherment=False,
                                        key_agreement=False, key_cert_sign=False,
                                        crl_sign=False, encipher_only=False,
                                        decipher_only=False), critical=True)
           .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]),
                          critical=True)
           .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
               ca_key.public_key()), critical=False)
           .sign(ca_key, hashes.SHA256()))
    return ca_key, ca, tsa_key, tsa


def stamp(request_der: bytes, tsa_key, tsa_cert, when: dt.datetime, serial: int) -> bytes:
    """The DER ``TimeStampResp`` granting ``request_der`` at ``when``."""
    request = tsp.TimeStampReq.load(request_der)
    info = tsp.TSTInfo({
        "version": "v1", "policy": POLICY, "message_imprint": request["message_imprint"],
        "serial_number": serial, "gen_time": when.astimezone(dt.UTC),
        "nonce": request["nonce"].native if request["nonce"].native is not None else None,
        "accuracy": {"seconds": 1}})
    if request["nonce"].native is None:
        del info["nonce"]
    content = info.dump()
    cert_der = tsa_cert.public_bytes(serialization.Encoding.DER)
    signing_cert = tsp.SigningCertificateV2({"certs": [tsp.ESSCertIDv2({
        "hash_algorithm": {"algorithm": "sha256"},
        "cert_hash": hashlib.sha256(cert_der).digest()})]})
    attrs = cms.CMSAttributes([
        cms.CMSAttribute({"type": "content_type", "values": ["tst_info"]}),
        cms.CMSAttribute({"type": "signing_time", "values": [cms.Time(
            {"utc_time": when.astimezone(dt.UTC)})]}),
        cms.CMSAttribute({"type": "message_digest",
                          "values": [hashlib.sha256(content).digest()]}),
        cms.CMSAttribute({"type": "signing_certificate_v2", "values": [signing_cert]}),
    ])
    signature = tsa_key.sign(attrs.dump(), padding.PKCS1v15(), hashes.SHA256())
    cert = asn1_x509.Certificate.load(cert_der)
    signer = cms.SignerInfo({
        "version": "v1",
        "sid": cms.SignerIdentifier({"issuer_and_serial_number": cms.IssuerAndSerialNumber({
            "issuer": cert.issuer, "serial_number": cert.serial_number})}),
        "digest_algorithm": algos.DigestAlgorithm({"algorithm": "sha256"}),
        "signed_attrs": attrs,
        "signature_algorithm": algos.SignedDigestAlgorithm({"algorithm": "sha256_rsa"}),
        "signature": signature})
    signed = cms.SignedData({
        "version": "v3", "digest_algorithms": [algos.DigestAlgorithm({"algorithm": "sha256"})],
        "encap_content_info": {"content_type": "tst_info",
                               "content": core.ParsableOctetString(content)},
        "certificates": [cms.CertificateChoices({"certificate": cert})],
        "signer_infos": [signer]})
    return tsp.TimeStampResp({
        "status": {"status": "granted"},
        "time_stamp_token": cms.ContentInfo({"content_type": "signed_data",
                                             "content": signed})}).dump()


class TimestampAuthority:
    """The TSA on 127.0.0.1 (``url``); ``clock()`` gives each token's time; ``requests``
    counts what it granted; ``refuse`` makes it answer 503 (a TSA that is down)."""

    def __init__(self, clock=None) -> None:
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        _, self.ca, self.key, self.cert = make_ca(dt.datetime.now(dt.UTC))
        self.requests = 0
        self.refuse = False
        self._lock = threading.Lock()
        authority = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if authority.refuse:
                    self.send_response(503)
                    self.end_headers()
                    return
                with authority._lock:
                    authority.requests += 1
                    serial = authority.requests
                answer = stamp(body, authority.key, authority.cert, authority.clock(), serial)
                self.send_response(200)
                self.send_header("content-type", "application/timestamp-reply")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/tsa"

    def ca_pem(self) -> bytes:
        return self.ca.public_bytes(serialization.Encoding.PEM)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
