#!/usr/bin/env python3
"""Recompute conformance/ohttp/vectors.json from the protocol text alone.

Independent of the Rust code: Binary HTTP (RFC 9292 known-length encoding and section 3.8
padding), HPKE base mode (RFC 9180: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM) and
OHTTP (RFC 9458 sections 4.3 and 4.4) are written out here; only X25519 and AES-GCM come from
the `cryptography` package. Run: python3 verify.py (exit status 0 when every value matches).
"""

import hashlib
import hmac
import json
import os
import sys

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives import serialization

KEM_ID, KDF_ID, AEAD_ID = 0x0020, 0x0001, 0x0001


def i2osp(n, w):
    return n.to_bytes(w, "big")


def extract(salt, ikm):
    return hmac.new(salt or b"\0" * 32, ikm, hashlib.sha256).digest()


def expand(prk, info, length):
    out, t, i = b"", b"", 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out += t
        i += 1
    return out[:length]


def labeled_extract(suite, salt, label, ikm):
    return extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite, prk, label, info, length):
    return expand(prk, i2osp(length, 2) + b"HPKE-v1" + suite + label + info, length)


KEM_SUITE = b"KEM" + i2osp(KEM_ID, 2)
HPKE_SUITE = b"HPKE" + i2osp(KEM_ID, 2) + i2osp(KDF_ID, 2) + i2osp(AEAD_ID, 2)


def raw(key):
    if isinstance(key, X25519PrivateKey):
        return key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def derive_key_pair(ikm):
    dkp_prk = labeled_extract(KEM_SUITE, b"", b"dkp_prk", ikm)
    sk = labeled_expand(KEM_SUITE, dkp_prk, b"sk", b"", 32)
    private = X25519PrivateKey.from_private_bytes(sk)
    return sk, raw(private.public_key())


def encap(pk_r, ikm_e):
    sk_e, pk_e = derive_key_pair(ikm_e)
    dh = X25519PrivateKey.from_private_bytes(sk_e).exchange(X25519PublicKey.from_public_bytes(pk_r))
    eae_prk = labeled_extract(KEM_SUITE, b"", b"eae_prk", dh)
    shared = labeled_expand(KEM_SUITE, eae_prk, b"shared_secret", pk_e + pk_r, 32)
    return shared, pk_e


def key_schedule(shared, info):
    psk_id_hash = labeled_extract(HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(HPKE_SUITE, b"", b"info_hash", info)
    context = b"\0" + psk_id_hash + info_hash
    secret = labeled_extract(HPKE_SUITE, shared, b"secret", b"")
    key = labeled_expand(HPKE_SUITE, secret, b"key", context, 16)
    nonce = labeled_expand(HPKE_SUITE, secret, b"base_nonce", context, 12)
    exporter = labeled_expand(HPKE_SUITE, secret, b"exp", context, 32)
    return key, nonce, exporter


def varint(n):
    if n < 1 << 6:
        return i2osp(n, 1)
    if n < 1 << 14:
        return i2osp(n | 1 << 14, 2)
    if n < 1 << 30:
        return i2osp(n | 2 << 30, 4)
    return i2osp(n | 3 << 62, 8)


def vec(b):
    return varint(len(b)) + b


def fields(headers):
    return vec(b"".join(vec(n.encode()) + vec(v.encode()) for n, v in headers))


def bhttp_request(r, body):
    control = b"".join(vec(r[k].encode()) for k in ("method", "scheme", "authority", "path"))
    return varint(0) + control + fields(r["headers"]) + vec(body) + vec(b"")


def bhttp_response(r, body):
    return varint(1) + varint(r["status"]) + fields(r["headers"]) + vec(body) + vec(b"")


def body_of(b):
    return (b["prefix"] + b["fill"] * b["count"] + b["suffix"]).encode()


def pad(message, classes, at_least=0):
    target = next(c for c in classes if max(len(message), at_least) <= c)
    return message + b"\0" * (target - len(message))


def request_at_least(doc, r):
    """The least class of a request: submissionClass for the submission route (method, and path
    without its query), a dummy's coverClass, else 0."""
    method, path = doc["submissionRoute"]
    route = r["path"].split("?")[0].split("#")[0]
    submission = r["method"].upper() == method and route == path
    return max(doc["submissionClass"] if submission else 0, r.get("coverClass", 0))


failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


def check_message(v, prefix, data):
    name = v["name"]
    check(f"{name} {prefix}Length", len(data) == v[prefix + "Length"])
    check(f"{name} {prefix}Sha256", hashlib.sha256(data).hexdigest() == v[prefix + "Sha256"])
    if prefix in v:
        check(f"{name} {prefix}", data.hex() == v[prefix])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "vectors.json"), encoding="utf-8") as f:
        doc = json.load(f)
    g = doc["gateway"]
    seed = bytes.fromhex(g["seed"])
    ikm = expand(extract(b"privsvc ohttp gateway key v1", seed), bytes([1]), 32)
    sk_r, pk_r = derive_key_pair(ikm)
    check("gateway secretKey", sk_r.hex() == g["secretKey"])
    check("gateway publicKey", pk_r.hex() == g["publicKey"])
    config = bytes([1]) + i2osp(KEM_ID, 2) + pk_r + i2osp(4, 2) + i2osp(KDF_ID, 2) + i2osp(AEAD_ID, 2)
    check("gateway keyConfig", config.hex() == g["keyConfig"])
    header = bytes([1]) + i2osp(KEM_ID, 2) + i2osp(KDF_ID, 2) + i2osp(AEAD_ID, 2)

    contexts = {}
    for r in doc["requests"]:
        body = body_of(r["body"])
        check(f"{r['name']} bodyLength", len(body) == r["bodyLength"])
        message = bhttp_request(r, body)
        check_message(r, "bhttp", message)
        padded = pad(message, doc["requestClasses"], request_at_least(doc, r))
        check(f"{r['name']} paddedLength", len(padded) == r["paddedLength"])
        shared, enc = encap(pk_r, bytes.fromhex(r["ikmE"]))
        check(f"{r['name']} enc", enc.hex() == r["enc"])
        key, nonce, exporter = key_schedule(shared, b"message/bhttp request\0" + header)
        sealed = header + enc + AESGCM(key).encrypt(nonce, padded, b"")
        check_message(r, "encapsulated", sealed)
        check(f"{r['name']} encapsulatedTag", sealed[-16:].hex() == r["encapsulatedTag"])
        contexts[r["name"]] = (exporter, enc)

    for r in doc["responses"]:
        body = body_of(r["body"])
        check(f"{r['name']} bodyLength", len(body) == r["bodyLength"])
        message = bhttp_response(r, body)
        check_message(r, "bhttp", message)
        padded = pad(message, doc["responseClasses"])
        check(f"{r['name']} paddedLength", len(padded) == r["paddedLength"])
        exporter, enc = contexts[r["request"]]
        secret = labeled_expand(HPKE_SUITE, exporter, b"sec", b"message/bhttp response", 16)
        response_nonce = bytes.fromhex(r["responseNonce"])
        prk = extract(enc + response_nonce, secret)
        sealed = response_nonce + AESGCM(expand(prk, b"key", 16)).encrypt(
            expand(prk, b"nonce", 12), padded, b""
        )
        check_message(r, "encapsulated", sealed)
        check(f"{r['name']} encapsulatedTag", sealed[-16:].hex() == r["encapsulatedTag"])

    t = doc["tooLarge"]
    big = bhttp_request(
        {"method": t["request"]["method"], "scheme": "https", "authority": "relayer.example",
         "path": t["request"]["path"], "headers": t["request"]["headers"]},
        body_of(t["request"]["body"]),
    )
    check("tooLarge request", len(big) == t["request"]["bhttpLength"] == doc["requestClasses"][-1] + 1)
    big = bhttp_response(t["response"], body_of(t["response"]["body"]))
    check("tooLarge response", len(big) == t["response"]["bhttpLength"] == doc["responseClasses"][-1] + 1)

    count = len(doc["requests"]) + len(doc["responses"])
    if failures:
        print("MISMATCH:", *failures, sep="\n  ")
        sys.exit(1)
    print(f"ok: gateway key, {count} request/response vectors, too-large cases")


main()
