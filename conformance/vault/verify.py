#!/usr/bin/env python3
"""Independent re-computation of the vault vectors (docs/PROTOCOL.md §1 and §8.5) from the
protocol text.

Uses only the Python standard library (hashlib, hmac) plus the `cryptography` package for
AES-256-GCM-SIV and secp256k1; Keccak-256 is implemented below. Run: python3 verify.py
It shares no code with the Rust implementation; a mismatch prints the case and exits non-zero.
"""
import hashlib
import hmac
import json
import os
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
import base64

HERE = os.path.dirname(os.path.abspath(__file__))
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

# ---- Keccak-256 (the pre-NIST padding 0x01 used by Ethereum) ----
RC = [0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
      0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
      0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
      0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
      0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
      0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008]
ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61], [28, 55, 25, 21, 56],
       [27, 20, 39, 8, 14]]
M64 = (1 << 64) - 1


def rol(x, n):
    return ((x << n) | (x >> (64 - n))) & M64 if n else x


def keccak_f(a):
    for rc in RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [[a[x][y] ^ d[x] for y in range(5)] for x in range(5)]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = rol(a[x][y], ROT[x][y])
        a = [[b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y]) for y in range(5)]
             for x in range(5)]
        a[0][0] ^= rc
    return a


def keccak256(data: bytes) -> bytes:
    rate = 136
    msg = bytearray(data) + b"\x01"
    while len(msg) % rate:
        msg.append(0)
    msg[-1] |= 0x80
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            x, y = i % 5, i // 5
            a[x][y] ^= int.from_bytes(block[8 * i:8 * i + 8], "little")
        a = keccak_f(a)
    out = b"".join(a[i % 5][i // 5].to_bytes(8, "little") for i in range(4))
    return out


assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"


# ---- the key schedule (docs/PROTOCOL.md §1) ----
def hkdf(ikm: bytes, info: bytes) -> bytes:
    prk = hmac.new(b"\x00" * 32, ikm, hashlib.sha256).digest()  # salt = none: HashLen zeros
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()  # 32 bytes = one block


def kdf(ikm, label, extra=b""):
    return hkdf(ikm, label.encode() + extra)


def checksum_address(addr20: bytes) -> str:
    h = addr20.hex()
    digest = keccak256(h.encode()).hex()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(h))


def address_of_key(key: bytes) -> str:
    priv = ec.derive_private_key(int.from_bytes(key, "big"), ec.SECP256K1())
    pub = priv.public_key().public_numbers()
    raw = pub.x.to_bytes(32, "big") + pub.y.to_bytes(32, "big")
    return checksum_address(keccak256(raw)[12:])


def owner_key(root, ref):
    for counter in range(256):
        k = kdf(root, "privsvc owner v1", ref + bytes([counter]))
        if 0 < int.from_bytes(k, "big") < N:
            return counter, k
    raise ValueError("no scalar")


def u256(n):
    return n.to_bytes(32, "big")


def domain_separator(chain_id):
    th = keccak256(b"EIP712Domain(string name,string version,uint256 chainId)")
    return keccak256(th + keccak256(b"privsvc") + keccak256(b"1") + u256(chain_id))


def derivation_hash(app, chain_id):
    th = keccak256(b"KeyDerivation(string purpose,string app)")
    sh = keccak256(th + keccak256(b"privsvc key v1") + keccak256(app.encode()))
    return keccak256(b"\x19\x01" + domain_separator(chain_id) + sh)


def proof_hash(body, chain_id):
    th = keccak256(b"OwnershipProof(bytes32 entityKey,string challenge,string verifier,"
                   b"uint64 notBefore,uint64 notAfter)")
    sh = keccak256(th + bytes.fromhex(body["entityKey"][2:]) + keccak256(body["challenge"].encode())
                   + keccak256(body["verifier"].encode()) + u256(body["notBefore"])
                   + u256(body["notAfter"]))
    return keccak256(b"\x19\x01" + domain_separator(chain_id) + sh)


def split_sig(sig_hex):
    """(r, s) of a 65-byte r || s || v signature; checks v in {27, 28} and low s."""
    sig = bytes.fromhex(sig_hex[2:])
    assert len(sig) == 65 and sig[64] in (27, 28), "v must be 27/28"
    r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:64], "big")
    assert s <= N // 2, "signature must be low-s"
    return r, s


FAIL = []


def check(what, got, want):
    if got != want:
        FAIL.append(f"{what}: computed {got}, vector has {want}")


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return json.load(f)


def main():
    d = load("derivation.json")
    wkey = bytes.fromhex(d["walletKey"][2:])
    check("wallet address", address_of_key(wkey), d["walletAddress"])
    wpub = ec.derive_private_key(int.from_bytes(wkey, "big"), ec.SECP256K1()).public_key()
    for c in d["cases"]:
        h = derivation_hash(c["app"], c["chainId"])
        check(f"derivation hash {c['app']}/{c['chainId']}", "0x" + h.hex(), c["typedDataHash"])
        r, s = split_sig(c["signature"])
        wpub.verify(encode_dss_signature(r, s), h, ec.ECDSA(Prehashed(hashes.SHA256())))
        sig = bytes.fromhex(c["signature"][2:])
        root = kdf(sig, "privsvc root v1", c["app"].encode())
        check("root", root.hex(), c["root"])
        check("tag key", kdf(root, "privsvc tag v1").hex(), c["tagKey"])

    o = load("owners.json")
    root = bytes.fromhex(o["vault"]["root"])
    check("owners root", kdf(bytes.fromhex(o["vault"]["signature"][2:]), "privsvc root v1",
                             o["vault"]["app"].encode()).hex(), o["vault"]["root"])
    for c in o["cases"]:
        counter, k = owner_key(root, bytes.fromhex(c["ref"]))
        check("owner counter", counter, c["counter"])
        check("owner key", k.hex(), c["ownerKey"])
        check("owner address", address_of_key(k), c["address"])

    s = load("scopes.json")
    root = bytes.fromhex(s["vault"]["root"])
    for c in s["cases"]:
        ref = hmac.new(root, b"privsvc scope v1" + c["name"].encode(), hashlib.sha256).digest()[:16]
        check(f"scope {c['name']!r}", ref.hex(), c["ref"])
        check(f"scope address {c['name']!r}", address_of_key(owner_key(root, ref)[1]), c["address"])

    t = load("tags.json")
    root = bytes.fromhex(t["vault"]["root"])
    tag_key = kdf(root, "privsvc tag v1")
    check("tags tag key", tag_key.hex(), t["tagKey"])
    for c in t["cases"]:
        nonce = bytes.fromhex(c["nonce"])
        tag = nonce + AESGCMSIV(tag_key).encrypt(nonce, bytes.fromhex(c["ref"]), None)
        check("tag", tag.hex(), c["tag"])
        check("tag text", base64.b64encode(tag).decode(), c["text"])

    e = load("encryption.json")
    root = bytes.fromhex(e["vault"]["root"])
    for c in e["cases"]:
        key = kdf(root, "privsvc enc v1", bytes.fromhex(c["ref"]))
        check("enc key", key.hex(), c["encKey"])
        nonce = bytes.fromhex(c["nonce"])
        stored = nonce + AESGCMSIV(key).encrypt(nonce, bytes.fromhex(c["plaintext"]), None)
        check("stored payload", stored.hex(), c["stored"])

    p = load("proofs.json")
    root = bytes.fromhex(p["vault"]["root"])
    for c in p["cases"]:
        h = proof_hash(c["body"], c["chainId"])
        check("proof hash", "0x" + h.hex(), c["typedDataHash"])
        _, k = owner_key(root, bytes.fromhex(c["signerRef"]))
        check("proof signer", address_of_key(k), c["signer"])
        r, s_ = split_sig(c["signature"])
        pub = ec.derive_private_key(int.from_bytes(k, "big"), ec.SECP256K1()).public_key()
        pub.verify(encode_dss_signature(r, s_), h, ec.ECDSA(Prehashed(hashes.SHA256())))

    rec = load("recovery.json")
    words = None
    for c in rec["cases"]:
        entropy = bytes.fromhex(c["entropy"])
        if words is None:
            words = bip39_words()
        if words:
            bits = bin(int.from_bytes(entropy + hashlib.sha256(entropy).digest()[:1], "big"))[2:]
            bits = bits.zfill(264)
            code = " ".join(words[int(bits[i:i + 11], 2)] for i in range(0, 264, 11))
            check("recovery code", code, c["code"])
        root = kdf(entropy, "privsvc random root v1", c["app"].encode())
        check("random root", root.hex(), c["root"])
        ref = hmac.new(root, b"privsvc scope v1default", hashlib.sha256).digest()[:16]
        check("random-root scope", ref.hex(), c["scopeDefault"])

    if FAIL:
        print("\n".join(FAIL))
        sys.exit(1)
    print("all vault vectors recomputed independently: OK")


def bip39_words():
    """The English word list, if a local copy is available (the bip39 crate's source)."""
    import glob
    import re
    for path in glob.glob(os.path.expanduser("~/.cargo/registry/src/*/bip39-2.*/src/language/english.rs")):
        text = open(path, encoding="utf-8").read()
        found = re.findall(r'"([a-z]+)"', text)
        if len(found) >= 2048:
            return found[:2048]
    print("note: BIP-39 English word list not found; recovery codes checked only by root")
    return []


if __name__ == "__main__":
    main()
