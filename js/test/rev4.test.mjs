// Revision 4 from JS, against the local stack (`scripts/js-test.sh`): a write is in the
// session's records at once with no request; the device store keeps tokens, pins and the scan
// cache between sessions, sealed (files 0600 in a 0700 directory), and discards a part it
// cannot open; a publicClient that is the wallet's own provider is refused; a token source is
// told when the write was requested. (In Chromium: test/browser/chromium.mjs.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

import { createPrivateClient, devWallet, fileTokenStore, KeyVault, NoTokenReady, PrivsvcError, TokenWallet } from 'privsvc';

const env = process.env;
const skip = env.PRIVSVC_RPC_URL && env.PRIVSVC_RELAYER_A && env.PRIVSVC_RELAYER_B ? false : 'needs the local stack: run scripts/js-test.sh';
const APP = 'notes';
/** Fast session timers (SessionSchedule, ms): tails, scans and refills within a second. */
const FAST = Object.freeze({ tailMs: [200, 500], statusTailMs: [0, 300], firstRefillMs: [0, 100], laterRefillMs: [2000, 4000], scanMs: [300, 800], fetchAgeBlocks: [16, 16] });
/** Timers that stay quiet for a minute after the session's start, and polls that end at once. */
const QUIET = Object.freeze({ tailMs: [60000, 60000], scanMs: [60000, 60000], statusTailMs: [0, 0], statusHorizonRounds: [0, 0], firstRefillMs: [600000, 600000] });

async function rpc(method, params = []) {
  const res = await fetch(env.PRIVSVC_RPC_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await res.json();
  if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code, data: body.error.data });
  return body.result;
}

/** An EIP-1193 provider over the devnet's RPC that records every call in `calls`. */
function recordingProvider(calls) {
  return {
    async request({ method, params = [] }) {
      calls.push(method);
      return rpc(method, params);
    },
  };
}

/** A wallet's own provider, as an injected wallet is: it signs, and forwards reads to its RPC. */
function walletProvider(signs = []) {
  const wallet = devWallet();
  const own = new Set(['eth_accounts', 'eth_requestAccounts', 'eth_signTypedData_v4', 'personal_sign']);
  return {
    address: wallet.address,
    signs,
    async request(args) {
      if (args.method === 'eth_signTypedData_v4' || args.method === 'personal_sign') signs.push(args.method);
      return own.has(args.method) ? wallet.request(args) : rpc(args.method, args.params ?? []);
    },
  };
}

async function ripe(c, limitMs = 30000) {
  const deadline = Date.now() + limitMs;
  while (c.ripeTokens() === 0) {
    if (Date.now() > deadline) throw new Error(`no ripe token after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const tempDir = (what) => mkdtempSync(join(tmpdir(), `privsvc-${what}-`));

test('a new user with viem\'s wallet client sees a write in myEntities at once, unverified, with no request; a scheduled scan verifies it', { skip, timeout: 120000 }, async () => {
  const { createWalletClient, http } = await import('viem');
  const { privateKeyToAccount } = await import('viem/accounts');
  // A second wallet of the test process: a user new to the app, its device store empty.
  const walletClient = createWalletClient({ account: privateKeyToAccount(`0x${randomBytes(32).toString('hex')}`), transport: http(env.PRIVSVC_RPC_URL) });
  const dir = tempDir('first-write');
  const calls = [];
  const sent = [];
  const options = {
    app: APP, wallet: walletClient, publicClient: recordingProvider(calls), relayers: [env.PRIVSVC_RELAYER_B],
    delayMs: [0, 0], pollMs: 250, rarityK: 0, tokenStore: fileTokenStore(dir),
    fetch: (url, init) => {
      sent.push(String(url));
      return fetch(url, init);
    },
  };
  const c = await createPrivateClient({ ...options, schedule: QUIET });
  const written = await c.createEntity({ payload: new TextEncoder().encode('seen at once'), contentType: 'text/plain', attributes: { kind: 'note' }, expires: 3600 });
  assert.ok(Number.isSafeInteger(written.block) && written.block > 0, `block ${written.block}`);
  const before = calls.length + sent.length;
  const mine = await c.myEntities();
  const filtered = await c.myEntities({ where: { kind: 'note' } });
  assert.equal(calls.length + sent.length - before, 0, `myEntities made requests: ${calls.slice(before - sent.length)} ${sent}`);
  assert.deepEqual(mine.map((r) => [r.entityKey, r.toText(), r.verified]), [[written.entityKey, 'seen at once', false]]);
  assert.equal(mine[0].createdAt, written.block);
  assert.deepEqual(filtered.map((r) => r.entityKey), [written.entityKey]);
  c.close();

  // The next session of this device shows it at once too (the scan cache keeps the user's
  // records), and its scheduled scans verify it once the batch's covers are final.
  const d = await createPrivateClient({ ...options, tokenStore: fileTokenStore(dir), schedule: FAST });
  try {
    assert.deepEqual((await d.myEntities()).map((r) => [r.entityKey, r.verified]), [[written.entityKey, false]]);
    await rpc('anvil_mine', ['0x20']);
    const deadline = Date.now() + 60000;
    let now = [];
    while (!now.some((r) => r.entityKey === written.entityKey && r.verified === true)) {
      if (Date.now() > deadline) throw new Error(`no scan verified the record: ${JSON.stringify(now.map((r) => [r.entityKey, r.verified]))}`);
      now = await d.myEntities({ refresh: true });
    }
    assert.equal(now.length, 1);
    assert.equal(now[0].toText(), 'seen at once');
  } finally {
    d.close();
  }
});

test('the device store keeps tokens, pins and the scan cache between sessions, sealed in files 0600 in a 0700 directory; a planted or altered part is discarded', { skip, timeout: 120000 }, async () => {
  const dataDir = join(tempDir('device'), 'data');
  const key = `0x${randomBytes(32).toString('hex')}`;
  const wallet = devWallet(key);
  const base = {
    app: APP, wallet, publicClient: env.PRIVSVC_RPC_URL, relayers: [env.PRIVSVC_RELAYER_A], delayMs: [0, 0], pollMs: 250, rarityK: 0,
    tokenMinAgeMs: 500, tokenMaxRipeMs: 1000,
  };
  const first = await createPrivateClient({ ...base, tokenStore: fileTokenStore(dataDir), schedule: FAST });
  assert.equal(first.deviceStore.kind, 'file');
  assert.match(first.deviceStore.id, /^[0-9a-f]{32}$/);
  await ripe(first);
  const w1 = await first.createEntity({ payload: new TextEncoder().encode('kept'), contentType: 'text/plain', expires: 3600 });
  const held = first.ripeTokens();
  first.close();
  const storeDir = join(dataDir, first.deviceStore.id);
  assert.equal(statSync(dataDir).mode & 0o777, 0o700);
  assert.equal(statSync(storeDir).mode & 0o777, 0o700);
  assert.deepEqual(readdirSync(storeDir).filter((f) => !f.startsWith('.lock')).sort(), ['pins.sealed', 'scan.sealed', 'tokens.sealed']);
  for (const f of ['pins.sealed', 'scan.sealed', 'tokens.sealed']) {
    assert.equal(statSync(join(storeDir, f)).mode & 0o777, 0o600, f);
    const bytes = readFileSync(join(storeDir, f));
    for (const clear of ['nonce', 'signature', new URL(env.PRIVSVC_RELAYER_A).host, 'kept']) assert.ok(!bytes.includes(Buffer.from(clear)), `${f} shows ${clear}`);
  }
  assert.equal(readFileSync(join(storeDir, 'tokens.sealed')).subarray(0, 9).toString('latin1'), 'PSVCDEV1\x01');

  // A later session: the earlier session's tokens are ripe at once (no refill for 10 minutes),
  // the relayer is pinned, the record is listed with no scan.
  const store = fileTokenStore(dataDir);
  const second = await createPrivateClient({ ...base, tokenStore: store, schedule: { ...FAST, firstRefillMs: [600000, 600000] } });
  assert.deepEqual(second.deviceStore.discarded, []);
  assert.ok(second.ripeTokens() >= 1 && second.ripeTokens() >= held - 1, `ripe tokens at start: ${second.ripeTokens()} (the first session held ${held})`);
  assert.deepEqual(Object.keys(store.relayerPins()), [env.PRIVSVC_RELAYER_A]);
  assert.deepEqual((await second.myEntities()).map((r) => r.entityKey), [w1.entityKey]);
  const w2 = await second.createEntity({ payload: new TextEncoder().encode('at once'), contentType: 'text/plain', expires: 3600 });
  assert.equal(w2.relayer, env.PRIVSVC_RELAYER_A, 'a stored token went to the relayer that requires one');
  second.close();

  // Another root's parts planted in this directory, and an altered byte: discarded, never
  // trusted; the session starts those parts empty and still writes.
  const strangerDir = join(tempDir('stranger'), 'data');
  const stranger = await createPrivateClient({ ...base, wallet: devWallet(), tokenStore: fileTokenStore(strangerDir), schedule: FAST });
  await ripe(stranger);
  stranger.close();
  copyFileSync(join(strangerDir, stranger.deviceStore.id, 'tokens.sealed'), join(storeDir, 'tokens.sealed'));
  const pins = readFileSync(join(storeDir, 'pins.sealed'));
  pins[pins.length - 1] ^= 1;
  writeFileSync(join(storeDir, 'pins.sealed'), pins);
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(String(m));
  let third;
  try {
    third = await createPrivateClient({ ...base, tokenStore: fileTokenStore(dataDir), schedule: { ...FAST, firstRefillMs: [600000, 600000] } });
  } finally {
    console.warn = warn;
  }
  assert.deepEqual([...third.deviceStore.discarded].sort(), ['pins', 'tokens']);
  assert.equal(warnings.filter((w) => /does not open under this vault's key; discarding it/.test(w)).length, 2, warnings.join('\n'));
  assert.equal(third.ripeTokens(), 0, 'a planted token is not spent');
  assert.deepEqual((await third.myEntities()).map((r) => r.entityKey).sort(), [w1.entityKey, w2.entityKey].sort(), 'the scan cache is kept');
  third.close();
  // Two processes never share a directory: this process holds it while a client is open.
  const holder = await createPrivateClient({ ...base, tokenStore: fileTokenStore(dataDir), schedule: QUIET });
  const { execFile } = await import('node:child_process');
  const options = JSON.stringify({ ...base, wallet: undefined, schedule: QUIET });
  const script = `const m = await import('privsvc');
try {
  await m.createPrivateClient({ ...${options}, wallet: m.devWallet(${JSON.stringify(key)}), tokenStore: m.fileTokenStore(${JSON.stringify(dataDir)}) });
  console.log('opened');
} catch (e) {
  console.log(e.message);
}
process.exit(0);`;
  const other = await new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url).pathname, timeout: 60000 }, (_, stdout, stderr) => resolve(`${stdout}${stderr}`));
  });
  holder.close();
  assert.match(other, /the token store is in use by another process/);
});

test('a publicClient that is the wallet\'s own provider is refused before the wallet signs, unless allowWalletRpc', { skip, timeout: 120000 }, async () => {
  const { createPublicClient, createWalletClient, custom } = await import('viem');
  const base = { app: APP, relayers: [env.PRIVSVC_RELAYER_B], memoryStores: true, schedule: QUIET };
  const refused = (why) => (e) => e instanceof PrivsvcError && /publicClient is the wallet's own provider/.test(e.message) && why.test(e.message) && /allowWalletRpc/.test(e.message);

  // The same provider object as wallet and publicClient.
  const p = walletProvider();
  await assert.rejects(createPrivateClient({ ...base, wallet: p, publicClient: p }), refused(/same object/));
  assert.deepEqual(p.signs, [], 'refused before the wallet was asked to sign');

  // A viem public client over custom(provider) with the wallet client's provider.
  const q = walletProvider();
  const wallet = createWalletClient({ transport: custom(q) });
  await assert.rejects(createPrivateClient({ ...base, wallet, publicClient: createPublicClient({ transport: custom(q) }) }), refused(/eth_accounts/));
  assert.deepEqual(q.signs, []);
  // ... or the wallet client itself as publicClient.
  await assert.rejects(createPrivateClient({ ...base, wallet, publicClient: wallet }), refused(/same object/));

  // window.ethereum for both (here globalThis.ethereum, as a page has it).
  const injected = walletProvider();
  globalThis.ethereum = injected;
  try {
    await assert.rejects(createPrivateClient({ ...base, wallet: createWalletClient({ transport: custom(globalThis.ethereum) }), publicClient: globalThis.ethereum }), refused(/window\.ethereum/));
    await assert.rejects(createPrivateClient({ ...base, vault: KeyVault.random(APP).vault, publicClient: globalThis.ethereum }), refused(/window\.ethereum/));
  } finally {
    delete globalThis.ethereum;
  }
  assert.deepEqual(injected.signs, []);

  // The app's explicit choice: accepted.
  const c = await createPrivateClient({ ...base, wallet: p, publicClient: p, allowWalletRpc: true });
  c.close();
  // A public client over custom() with a provider that is not the wallet's: accepted.
  const calls = [];
  const d = await createPrivateClient({ ...base, wallet: createWalletClient({ transport: custom(walletProvider()) }), publicClient: createPublicClient({ transport: custom(recordingProvider(calls)) }) });
  d.close();
  assert.ok(calls.includes('arkiv_query'));
  await assert.rejects(createPrivateClient({ ...base, wallet: p, publicClient: p, allowWalletRpc: 'yes' }), PrivsvcError);
});

test('a token source is told when the write was requested (take(app, requestedMs)) and never waits; TokenWallet.source() hands out only tokens obtained before it', { skip, timeout: 120000 }, async () => {
  const info = await (await fetch(`${env.PRIVSVC_RELAYER_A}/v1/info`)).json();
  const w = devWallet();
  const tokens = new TokenWallet({ wallet: w, reader: env.PRIVSVC_RPC_URL, issuer: info.issuer, issuerUrl: info.issuerUrl, minAgeMs: 0, maxRipeMs: 0 });
  const before = Date.now() - 1;
  assert.equal((await tokens.acquire(APP, 2)).count, 2);
  const source = tokens.source();
  assert.equal(await source.take(APP, before), null, 'a token obtained after the write was requested is not handed out');
  const asked = [];
  const recording = {
    async take(app, requestedMs) {
      asked.push({ app, requestedMs, at: Date.now() });
      return source.take(app, requestedMs);
    },
    putBack: (app, token) => source.putBack(app, token),
  };
  const c = await createPrivateClient({
    app: APP, vault: KeyVault.random(APP).vault, publicClient: env.PRIVSVC_RPC_URL, relayers: [env.PRIVSVC_RELAYER_A],
    tokens: recording, delayMs: [300, 300], pollMs: 250, rarityK: 0, memoryStores: true, schedule: QUIET,
  });
  try {
    const requested = Date.now();
    const r = await c.createEntity({ payload: new TextEncoder().encode('told when'), contentType: 'text/plain', expires: 3600 });
    assert.equal(r.relayer, env.PRIVSVC_RELAYER_A);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].app, APP);
    assert.ok(asked[0].requestedMs >= requested && asked[0].requestedMs <= requested + 50, `requestedMs ${asked[0].requestedMs}, the write was requested at ${requested}`);
    assert.ok(asked[0].at >= asked[0].requestedMs + 250, 'take is called at submission, after the random delay');
    assert.equal(tokens.available(APP), 1);
  } finally {
    c.close();
  }
  // A source that waits (for a token to ripen, say) is not waited for: the write goes on as
  // with no token, and the token it hands out late is put back.
  const returned = [];
  const waiting = {
    take: (app, requestedMs) => new Promise((resolve) => setTimeout(() => resolve(source.take(app, requestedMs + 10000)), 3000)),
    putBack: async (app, token) => {
      returned.push(token.nonce);
      await source.putBack(app, token);
    },
  };
  const d = await createPrivateClient({
    app: APP, vault: KeyVault.random(APP).vault, publicClient: env.PRIVSVC_RPC_URL, relayers: [env.PRIVSVC_RELAYER_A],
    tokens: waiting, delayMs: [0, 0], pollMs: 250, rarityK: 0, memoryStores: true, schedule: QUIET,
  });
  const warn = console.warn;
  const warnings = [];
  console.warn = (m) => warnings.push(String(m));
  try {
    const t0 = Date.now();
    await assert.rejects(d.createEntity({ payload: new TextEncoder().encode('not waited for'), contentType: 'text/plain', expires: 3600 }), NoTokenReady);
    assert.ok(Date.now() - t0 < 2500, `the write waited ${Date.now() - t0} ms for the source`);
    assert.ok(warnings.some((w) => /did not answer take\(\) within 1000 ms/.test(w)), warnings.join('\n'));
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(returned.length, 1, 'the late token was put back');
    assert.equal(tokens.available(APP), 1);
  } finally {
    console.warn = warn;
    d.close();
  }
});
