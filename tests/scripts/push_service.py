"""A local HTTPS web-push service for Flowhost's delivery tests: what Chrome's or Firefox's push service does
with a message, checked with implementations independent of Flowhost's (Python `cryptography` and `http_ece`).

    push_service.py DIR     listens on 127.0.0.1 (a free port), writes DIR/ca.pem (the certificate to trust,
                            through SSL_CERT_FILE) and prints "LISTENING <port>" when ready

Routes:
- POST /subscriptions {"statuses": [201, ...], "retry_after": "2"?} creates a subscription as a browser would (a
  P-256 key pair and an auth secret held here) and answers {"id", "endpoint", "keys": {"p256dh", "auth"}}. Each
  push to it is answered with the next status of `statuses` (the last one repeats).
- POST /push/<id> a push message: the VAPID JWT is verified (ES256 with the key in `k`, `aud` the origin, `exp`
  within 24 h, `sub` a mailto: or https: URI), the body decrypted (RFC 8291 aes128gcm), and both recorded.
- GET /received/<id> every push to that subscription: {"status", "payload", "claims", "headers", "error"?}.
"""

import base64
import datetime
import json
import os
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID
import ipaddress

LOCK = threading.Lock()
SUBSCRIPTIONS = {}


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def certificate(directory):
    """A CA (written to ca.pem, what clients trust) and a server certificate for 127.0.0.1 signed by it: TLS
    libraries such as rustls refuse a CA certificate presented as the server's own."""
    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject, issuer, public_key, signing_key, ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False,
            )
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "flowhost test push CA")])
    ca = build(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    server = build(server_name, ca_name, server_key.public_key(), ca_key, False)
    ca_path = os.path.join(directory, "ca.pem")
    chain_path, key_path = os.path.join(directory, "server.pem"), os.path.join(directory, "server-key.pem")
    with open(ca_path, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(chain_path, "wb") as f:
        f.write(server.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return chain_path, key_path


def verify_vapid(authorization, origin):
    """The claims of a valid `vapid t=<jwt>, k=<key>` header; raises ValueError saying what is wrong."""
    if not authorization.startswith("vapid "):
        raise ValueError("Authorization is not a vapid scheme: %r" % authorization[:20])
    params = dict(part.strip().split("=", 1) for part in authorization[len("vapid "):].split(","))
    token, key = params["t"], params["k"]
    header_b64, claims_b64, signature_b64 = token.split(".")
    header = json.loads(unb64u(header_b64))
    if header.get("alg") != "ES256":
        raise ValueError("alg is not ES256")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(key))
    signature = unb64u(signature_b64)
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        public.verify(der, ("%s.%s" % (header_b64, claims_b64)).encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("the JWT signature does not verify")
    claims = json.loads(unb64u(claims_b64))
    if claims.get("aud") != origin:
        raise ValueError("aud %r is not the origin %r" % (claims.get("aud"), origin))
    now = time.time()
    if not (now < claims.get("exp", 0) <= now + 24 * 3600):
        raise ValueError("exp %r is not within 24 hours" % claims.get("exp"))
    if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
        raise ValueError("sub %r is not a mailto: or https: URI" % claims.get("sub"))
    return claims


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_POST(self):
        if self.path == "/subscriptions":
            request = json.loads(self.body() or b"{}")
            key = ec.generate_private_key(ec.SECP256R1())
            auth = os.urandom(16)
            sid = uuid.uuid4().hex
            with LOCK:
                SUBSCRIPTIONS[sid] = {"key": key, "auth": auth, "statuses": request.get("statuses", [201]),
                                      "retry_after": request.get("retry_after"), "received": []}
            public = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            port = self.server.server_address[1]
            self.answer(201, {"id": sid, "endpoint": "https://127.0.0.1:%d/push/%s" % (port, sid),
                              "keys": {"p256dh": b64u(public), "auth": b64u(auth)}})
            return
        if self.path.startswith("/push/"):
            sid = self.path[len("/push/"):]
            content = self.body()
            with LOCK:
                subscription = SUBSCRIPTIONS.get(sid)
            if subscription is None:
                self.answer(404, {"error": "no such subscription"})
                return
            record = {"headers": {k.lower(): v for k, v in self.headers.items() if k.lower() in
                                  ("ttl", "urgency", "topic", "content-encoding", "content-type")}}
            try:
                origin = "https://127.0.0.1:%d" % self.server.server_address[1]
                record["claims"] = verify_vapid(self.headers.get("Authorization", ""), origin)
                if self.headers.get("Content-Encoding") != "aes128gcm":
                    raise ValueError("Content-Encoding is not aes128gcm")
                plain = http_ece.decrypt(content, private_key=subscription["key"], auth_secret=subscription["auth"], version="aes128gcm")
                record["payload"] = json.loads(plain)
            except Exception as error:  # noqa: BLE001 - the test reads what went wrong
                record["error"] = "%s: %s" % (type(error).__name__, error)
            with LOCK:
                statuses = subscription["statuses"]
                status = statuses[min(len(subscription["received"]), len(statuses) - 1)]
                record["status"] = status
                subscription["received"].append(record)
            if "error" in record:
                self.answer(400, {"error": record["error"]})
                return
            headers = {"Retry-After": subscription["retry_after"]} if status == 429 and subscription["retry_after"] else {}
            self.answer(status, None, headers)
            return
        self.answer(404, {"error": "unknown route"})

    def do_GET(self):
        if self.path.startswith("/received/"):
            with LOCK:
                subscription = SUBSCRIPTIONS.get(self.path[len("/received/"):])
                received = list(subscription["received"]) if subscription else None
            self.answer(200 if received is not None else 404, received)
            return
        self.answer(404, {"error": "unknown route"})


def main():
    directory = sys.argv[1]
    cert, key = certificate(directory)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("LISTENING %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
