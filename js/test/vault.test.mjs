// KeyVault, WorkerVault, wallets and proofs in Node.js against the conformance vectors: the same
// bytes as the Rust crates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { packOpened } from '../bytes.js';

import {
  KeyVault,
  WorkerVault,
  NonDeterministicWalletError,
  SmartContractWalletError,
  PrivsvcError,
  devWallet,
  vaultFromWallet,
  derivationTypedData,
  proofTypedData,
  signOwnershipProof,
  verifyOwnershipProof,
  DERIVATION_PURPOSE,
  NETWORK_CHAIN_ID,
} from 'privsvc';

const vector = (name) => JSON.parse(readFileSync(new URL(`../../conformance/vault/${name}.json`, import.meta.url), 'utf8'));
const derivation = vector('derivation');
const owners = vector('owners');
const scopes = vector('scopes');
const tags = vector('tags');
const enc = vector('encryption');
const recovery = vector('recovery');
const proofs = vector('proofs');
const hex = (b) => Buffer.from(b).toString('hex');

test('the dev wallet signs the derivation message as the Rust wallet does', async () => {
  const wallet = devWallet(derivation.walletKey);
  assert.equal(wallet.address, derivation.walletAddress);
  for (const c of derivation.cases) {
    const sig = await KeyVault.signDerivation(wallet, c.app, { chainId: c.chainId });
    assert.equal(sig, c.signature, `app ${c.app} chain ${c.chainId}`);
  }
  const td = derivationTypedData('notes');
  assert.equal(td.message.purpose, DERIVATION_PURPOSE);
  assert.equal(td.domain.chainId, NETWORK_CHAIN_ID);
});

test('KeyVault.fromWallet gives the conformance owners, scopes, tags and payload keys', async () => {
  const vault = await KeyVault.fromWallet(devWallet(derivation.walletKey), owners.vault.app);
  assert.equal(vault.app, owners.vault.app);
  for (const c of owners.cases) assert.equal(vault.addressOf(c.ref), c.address);
  for (const c of scopes.cases) {
    assert.equal(vault.scopeRecord(c.name), c.ref);
    assert.equal(vault.addressOf(c.ref), c.address);
  }
  const opened = vault.openTags(tags.cases.map((c) => c.text).concat(['not a tag', 'A'.repeat(60)]));
  assert.deepEqual(opened, tags.cases.map((c) => c.ref).concat([undefined, undefined]));
  for (const c of enc.cases) {
    assert.equal(hex(vault.decrypt(c.ref, Buffer.from(c.stored, 'hex'))), c.plaintext);
  }
  const ref = vault.newRecord();
  assert.match(ref, /^[0-9a-f]{32}$/);
  assert.notEqual(ref, vault.newRecord());
  const sealed = vault.encrypt(ref, 'hello');
  assert.equal(new TextDecoder().decode(vault.decrypt(ref, sealed)), 'hello');
  assert.throws(() => vault.decrypt(vault.newRecord(), sealed), PrivsvcError);
  const [mine] = vault.openTags([vault.makeTag(ref)]);
  assert.equal(mine, ref);
});

test('a custom vault\'s openTags answer is packed as the built-in vaults answer; anything but references and holes is refused', () => {
  const a = '0x' + '11'.repeat(16);
  const b = '22'.repeat(16);
  const packed = packOpened([undefined, a, null, b], 5);
  assert.equal(packed.length, 40);
  const view = new DataView(packed.buffer);
  assert.deepEqual([view.getUint32(0, true), view.getUint32(20, true)], [1, 3]);
  assert.deepEqual([...packed.subarray(4, 20)], Array(16).fill(0x11));
  assert.deepEqual([...packed.subarray(24, 40)], Array(16).fill(0x22));
  assert.equal(packOpened([], 3).length, 0);
  assert.throws(() => packOpened([undefined, 'not a reference'], 2), /invalid record reference for tag 1/);
  assert.throws(() => packOpened([a, a, a], 2), /3 entries for 2 tags/);
  assert.throws(() => packOpened('nope', 2), /no array/);
});

test('openTags takes ledger-form tags or one Uint8Array of raw tags; malformed tags are somebody else\'s', async () => {
  const vault = KeyVault.fromSignature(owners.vault.signature, owners.vault.app);
  const { vault: other } = KeyVault.random(owners.vault.app);
  const foreign = other.makeTag(other.newRecord());
  // canonical base64 only: the last character before '=' carries 4 bits, the other 2 are zero
  const loose = (t) => t.slice(0, 58) + (t[58] === 'B' ? 'C' : 'B') + '=';
  const junk = ['not a tag', 'A'.repeat(60), 'é'.repeat(59) + '=', loose(tags.cases[0].text), 42, foreign];
  const texts = [];
  const want = [];
  tags.cases.forEach((c, i) => {
    texts.push(junk[i % junk.length], c.text);
    want.push(undefined, c.ref);
  });
  assert.deepEqual(vault.openTags(texts), want);
  assert.deepEqual(vault.openTags([]), []);

  const rawOf = (list) => {
    const out = new Uint8Array(44 * list.length);
    list.forEach((t, i) => out.set(Buffer.from(t, 'base64'), 44 * i));
    return out;
  };
  const raw = rawOf([foreign, ...tags.cases.map((c) => c.text)]);
  const rawWant = [undefined, ...tags.cases.map((c) => c.ref)];
  assert.deepEqual(vault.openTags(raw), rawWant);
  assert.throws(() => vault.openTags(raw.subarray(1)), PrivsvcError);

  const worker = await WorkerVault.fromSignature(owners.vault.signature, owners.vault.app);
  try {
    assert.deepEqual(await worker.openTags(texts), want);
    assert.deepEqual(await worker.openTags(raw), rawWant);
    // The app's own bytes stay where they are; the client's form moves its copy to the worker.
    assert.equal(raw.byteLength, 44 * (1 + tags.cases.length));
    const packed = vault._openTagBytes(raw);
    assert.equal(packed.length, 20 * tags.cases.length);
    tags.cases.forEach((c, i) => {
      assert.equal(new DataView(packed.buffer).getUint32(20 * i, true), i + 1);
      assert.equal(Buffer.from(packed.subarray(20 * i + 4, 20 * i + 20)).toString('hex'), c.ref.replace(/^0x/, ''));
    });
    const copy = raw.slice();
    assert.deepEqual(await worker._openTagBytes(copy), packed);
    assert.equal(copy.byteLength, 0, 'the buffer moved to the worker, not copied');
  } finally {
    worker.terminate();
  }
});

test('random roots and recovery codes match the vectors', () => {
  for (const c of recovery.cases) {
    const v = KeyVault.fromRecoveryCode(c.code, c.app);
    assert.equal(v.scopeRecord('default'), c.scopeDefault);
  }
  const { vault, recoveryCode } = KeyVault.random('notes');
  assert.equal(recoveryCode.split(' ').length, 24);
  const again = KeyVault.fromRecoveryCode(recoveryCode, 'notes');
  const ref = vault.newRecord();
  assert.equal(again.addressOf(ref), vault.addressOf(ref));
  assert.throws(() => KeyVault.fromRecoveryCode('abandon abandon', 'notes'), PrivsvcError);
});

test('a non-deterministic wallet is refused', async () => {
  const a = devWallet();
  let calls = 0;
  // Answers with a different (valid) signature every second time: as a wallet that randomises k.
  const flaky = {
    request: async (args) => {
      if (args.method === 'eth_signTypedData_v4' && ++calls % 2 === 0) {
        const sig = await a.request(args);
        const last = sig.slice(-2);
        return sig.slice(0, -4) + (last === '1b' ? 'ff1c' : 'ff1b');
      }
      return a.request(args);
    },
  };
  await assert.rejects(KeyVault.fromWallet(flaky, 'notes'), NonDeterministicWalletError);
  await assert.rejects(WorkerVault.fromWallet(flaky, 'notes'), NonDeterministicWalletError);
  assert.equal(calls, 4);
});

test('a contract wallet is refused by its signature, and nobody is asked for the wallet\'s code', async () => {
  // An EIP-7702 delegated account has code but its key still signs: it passes, and no RPC call
  // names the wallet (PROTOCOL revision 3).
  const a = devWallet();
  const asked = [];
  const withCode = {
    request: async (args) => {
      asked.push(args.method);
      return args.method === 'eth_getCode' ? '0x6080' : a.request(args);
    },
  };
  const v = await KeyVault.fromWallet(withCode, 'notes');
  assert.equal(v.app, 'notes');
  assert.ok(!asked.includes('eth_getCode'), asked.join(' '));
  // A contract wallet's signature does not recover to its address.
  const other = devWallet();
  const foreign = {
    request: async (args) => (args.method === 'eth_accounts' ? [a.address] : other.request(args)),
  };
  await assert.rejects(KeyVault.fromWallet(foreign, 'notes'), SmartContractWalletError);
});

test('a viem-like wallet client works as a wallet', async () => {
  const a = devWallet(derivation.walletKey);
  const client = {
    account: { address: a.address },
    async signTypedData({ domain, types, primaryType, message }) {
      const full = {
        types: { EIP712Domain: [{ name: 'name', type: 'string' }, { name: 'version', type: 'string' }, { name: 'chainId', type: 'uint256' }], ...types },
        domain,
        primaryType,
        message,
      };
      return a.request({ method: 'eth_signTypedData_v4', params: [a.address, JSON.stringify(full)] });
    },
    async signMessage() {
      throw new Error('not used');
    },
  };
  const c = derivation.cases[0];
  assert.equal(await KeyVault.signDerivation(client, c.app, { chainId: c.chainId }), c.signature);
});

test('proof signatures match the vectors; long windows are refused', async () => {
  const vault = KeyVault.fromSignature(proofs.vault.signature, proofs.vault.app);
  // JSON numbers above 2^53 (a vector's notAfter of 2^64 - 1) do not survive JSON.parse in JS.
  for (const c of proofs.cases.filter((x) => Number.isSafeInteger(x.body.notAfter))) {
    const signer = vault.signer(c.signerRef);
    assert.equal(signer.address, c.signer);
    assert.equal(signer.signProof(c.body, c.chainId), c.signature);
  }
  const c = proofs.cases[0];
  assert.equal(proofTypedData(c.body).primaryType, 'OwnershipProof');
  const signer = vault.signer(c.signerRef);
  const proof = await signOwnershipProof(signer, { entityKey: c.body.entityKey, challenge: 'x', verifier: 'shop.example', now: 1_700_000_000 });
  assert.equal(proof.notAfter - proof.notBefore, 300);
  assert.equal(proof.owner.toLowerCase(), c.signer.toLowerCase());
  assert.equal(proof.chainId, NETWORK_CHAIN_ID);
  assert.match(proof.signature, /^0x[0-9a-f]{130}$/);
  await assert.rejects(signOwnershipProof(signer, { entityKey: c.body.entityKey, challenge: 'x', verifier: 'v', ttlSeconds: 3601 }), PrivsvcError);
});

test('WorkerVault gives the same results as KeyVault and keeps keys in the worker', async () => {
  const local = KeyVault.fromSignature(owners.vault.signature, owners.vault.app);
  const worker = await WorkerVault.fromWallet(devWallet(derivation.walletKey), owners.vault.app);
  try {
    for (const c of owners.cases) assert.equal(await worker.addressOf(c.ref), c.address);
    assert.deepEqual(await worker.openTags(tags.cases.map((t) => t.text)), tags.cases.map((t) => t.ref));
    const ref = await worker.newRecord();
    const sealed = await worker.encrypt(ref, 'in a worker');
    assert.equal(new TextDecoder().decode(local.decrypt(ref, sealed)), 'in a worker');
    const p = proofs.cases[0];
    const ws = await worker.signer(p.signerRef);
    assert.equal(await ws.signProof(p.body, p.chainId), p.signature);
    assert.equal(Object.keys(ws).join(','), 'address');
    const proof = await signOwnershipProof(ws, { entityKey: p.body.entityKey, challenge: 'c', verifier: 'v' });
    assert.equal(proof.owner.toLowerCase(), p.signer.toLowerCase());
    await assert.rejects(worker.decrypt(await worker.newRecord(), sealed), PrivsvcError);
  } finally {
    worker.terminate();
  }
  await assert.rejects(worker.newRecord(), /terminated/);
  const { vault, recoveryCode } = await WorkerVault.random('notes');
  const back = KeyVault.fromRecoveryCode(recoveryCode, 'notes');
  const ref = back.newRecord();
  assert.equal(await vault.addressOf(ref), back.addressOf(ref));
  vault.terminate();
});

test('WorkerVault.spawn() starts a worker without keys; load* puts keys in it', async () => {
  const { vault: local, recoveryCode } = KeyVault.random('notes');
  const ref = local.newRecord();
  const v = await WorkerVault.spawn();
  try {
    assert.equal(v.app, undefined);
    await assert.rejects(v.addressOf(ref), (e) => e instanceof PrivsvcError && /no keys/.test(e.message));
    await v.loadRecoveryCode(recoveryCode, 'notes');
    assert.equal(v.app, 'notes');
    assert.equal(await v.addressOf(ref), local.addressOf(ref));
    const code = await v.loadRandom('other');
    assert.equal(code.split(' ').length, 24);
    assert.equal(v.app, 'other');
    await v.loadWallet(devWallet(derivation.walletKey), owners.vault.app);
    assert.equal(await v.addressOf(owners.cases[0].ref), owners.cases[0].address);
  } finally {
    v.terminate();
  }
});

test('vaultFromWallet: a worker vault when isolateKeys, a KeyVault only when asked; vault.isolated tells which', async () => {
  const wallet = devWallet(derivation.walletKey);
  const inWorker = await vaultFromWallet(wallet, owners.vault.app, { isolateKeys: true });
  try {
    assert.ok(inWorker instanceof WorkerVault);
    assert.equal(inWorker.isolated, true);
    assert.equal(await inWorker.addressOf(owners.cases[0].ref), owners.cases[0].address);
  } finally {
    inWorker.terminate();
  }
  const inThread = await vaultFromWallet(wallet, owners.vault.app, { isolateKeys: false });
  assert.ok(inThread instanceof KeyVault);
  assert.equal(inThread.isolated, false);
  assert.equal(inThread.addressOf(owners.cases[0].ref), owners.cases[0].address);
  // Node.js keeps keys in the thread unless asked (isolateKeys defaults to inBrowser).
  assert.equal((await vaultFromWallet(wallet, owners.vault.app)).isolated, false);
});

test('an ownership proof without a challenge or a verifier is refused, not signed over "undefined"', async () => {
  const { vault } = KeyVault.random('notes');
  const signer = vault.signer(vault.newRecord());
  const entityKey = `0x${'11'.repeat(32)}`;
  await assert.rejects(signOwnershipProof(signer, { entityKey, verifier: 'shop.example' }), (e) => e instanceof PrivsvcError && /`challenge` is required/.test(e.message));
  await assert.rejects(signOwnershipProof(signer, { entityKey, challenge: 'c' }), (e) => e instanceof PrivsvcError && /`verifier` is required/.test(e.message));
  await assert.rejects(signOwnershipProof(signer, { entityKey, challenge: '', verifier: 'v' }), PrivsvcError);
  await assert.rejects(verifyOwnershipProof({}, { verifier: 'v', client: 'http://127.0.0.1:9' }), (e) => e instanceof PrivsvcError && /`challenge` is required/.test(e.message));
  const ok = await signOwnershipProof(signer, { entityKey, challenge: 'c', verifier: 'v' });
  assert.equal(ok.challenge, 'c');
});
