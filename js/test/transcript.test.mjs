// The transcript rule of docs/PROTOCOL.md §8.2, from JS (the twin of
// crates/privsvc-client/tests/it/transcript.rs):
// every request the client sends (to the RPC, a relayer, the issuer) and its timing is a function
// of public data, the client's own randomness and timers, and, for batch fetches only, the
// user's batches among their covers.
//
// Two users with the same seed run the same session (discover, wait for a ripe token, write,
// list their records, prove ownership, write again, list again, idle) against the local stack,
// one after the other. Every RPC call goes through a recording EIP-1193 provider, every relayer
// and issuer call through a recording `fetch`. Apart from batch fetches (with the timestamps of
// their blocks) and the submissions and status polls of writes, their transcripts must be equal:
// the same requests (parameters up to numbers), as many times, at times that agree within a
// tolerance. Each fetch burst reads the timestamps of all its blocks and no other.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createPrivateClient, devWallet } from 'privsvc';

const env = process.env;
const skip = env.PRIVSVC_RPC_URL && env.PRIVSVC_RELAYER_A ? false : 'needs the local stack: run scripts/js-test.sh';
const APP = 'notes';

/** The moments of the session's actions, ms from its start. */
const WRITE_1 = 3000;
const SCAN_1 = 6000;
const WRITE_2 = 7000;
const SCAN_2 = 10000;
const END = 12000;
/** How far the same request of the two users may be apart in time, ms. */
const TOLERANCE_MS = 1500;
const FAST = { tailMs: [200, 500], statusTailMs: [0, 300], firstRefillMs: [0, 100], laterRefillMs: [2000, 4000], scanMs: [1000, 2000], fetchAgeBlocks: [16, 16] };

/** Block numbers and other quantities out of a request's text; addresses and hashes stay. */
function normalize(text) {
  return text.replace(/0x[0-9a-fA-F]+|\d+/g, (m) => (m.startsWith('0x') && m.length > 18 ? m.toLowerCase() : 'N'));
}

/**
 * Whether an RPC call is part of a fetch burst (a batch fetch or a block timestamp read). The
 * creation time of an issuer's key (read by the key check, on the keys timer) is not.
 */
function isFetch(method, params, keyBlocks) {
  if (method === 'eth_getBlockByNumber') return params[0] !== 'latest' && !keyBlocks.has(Number(BigInt(params[0])));
  return typeof params[0] === 'string' && params[0].includes('$createdAt = u64(');
}

async function rpc(method, params) {
  const res = await fetch(env.PRIVSVC_RPC_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await res.json();
  if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code, data: body.error.data });
  return body.result;
}

const sleepUntil = (t) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

async function runSession(seed) {
  const calls = [];
  const keyBlocks = new Set();
  let started = Date.now();
  const provider = {
    async request({ method, params = [] }) {
      calls.push({ at: Date.now(), party: 'rpc', method, params });
      const result = await rpc(method, params);
      if (method === 'arkiv_query' && String(params[0]).includes("privsvc_kind = str('issuer-key')")) {
        for (const row of (result && result.data) || []) if (row.createdAt !== undefined) keyBlocks.add(Number(BigInt(row.createdAt)));
      }
      return result;
    },
  };
  const relayerName = (url) => (url.startsWith(env.PRIVSVC_RELAYER_A) ? 'relayer a' : url.startsWith(env.PRIVSVC_RELAYER_B) ? 'relayer b' : url);
  const recording = (url, init) => {
    const u = new URL(url);
    let what = `${init.method} ${normalize(u.pathname)}`;
    if (u.pathname === '/v1/tokens/issue') {
      const body = JSON.parse(new TextDecoder().decode(init.body));
      what = `${init.method} ${u.pathname} blinded=${body.blinded.length}`;
    }
    // Submissions and their status polls are the write's own.
    if (!u.pathname.startsWith('/v1/records')) calls.push({ at: Date.now(), party: relayerName(String(url)), what });
    return fetch(url, init);
  };
  started = Date.now();
  const client = await createPrivateClient({
    app: APP,
    wallet: devWallet(),
    publicClient: provider,
    seed,
    schedule: FAST,
    delayMs: [0, 300],
    pollMs: 100,
    tokenMinAgeMs: 1000,
    tokenMaxRipeMs: 1000,
    fetch: recording,
  });
  const at = (ms) => sleepUntil(started + ms);
  // The world moves on (other users' blocks): mine so that covers are final. Not the client's.
  const settle = () => rpc('anvil_mine', ['0x20']);
  await at(WRITE_1);
  const first = await client.createEntity({ payload: new TextEncoder().encode('one'), contentType: 'text/plain', attributes: { kind: 'note' }, expires: 3600 });
  await settle();
  await at(SCAN_1);
  const one = await client.myEntities({ refresh: true });
  assert.ok(one.some((r) => r.entityKey === first.entityKey), 'the first scan found the first record');
  await client.proveOwnership(first.entityKey, { challenge: 'c', verifier: 'v' });
  await at(WRITE_2);
  await client.createEntity({ payload: new TextEncoder().encode('two'), contentType: 'text/plain', attributes: { kind: 'note' }, expires: 3600 });
  await settle();
  await at(SCAN_2);
  assert.equal((await client.myEntities({ refresh: true })).length, 2);
  await at(END);
  client.close();

  const transcript = [];
  const bursts = [];
  const inWindow = calls.filter((c) => c.at - started <= END);
  const fetchTimes = inWindow.filter((c) => c.party === 'rpc' && isFetch(c.method, c.params, keyBlocks) && c.method !== 'eth_getBlockByNumber').map((c) => c.at);
  const nearFetch = (t) => fetchTimes.some((f) => Math.abs(t - f) <= 1000);
  let lastFetch = -Infinity;
  for (const c of inWindow) {
    const t = c.at - started;
    if (c.party === 'rpc') {
      if (isFetch(c.method, c.params, keyBlocks) && nearFetch(c.at)) {
        if (c.at - lastFetch > 1000) bursts.push({ fetched: new Set(), timestamps: new Set() });
        lastFetch = c.at;
        const burst = bursts.at(-1);
        if (c.method === 'eth_getBlockByNumber') burst.timestamps.add(Number(BigInt(c.params[0])));
        else for (const part of c.params[0].split('$createdAt = u64(').slice(1)) burst.fetched.add(Number(part.split(')')[0]));
        continue;
      }
      transcript.push({ at: t, party: 'rpc', what: `${c.method} ${normalize(JSON.stringify(c.params))}` });
    } else {
      transcript.push({ at: t, party: c.party, what: c.what });
    }
  }
  return { transcript, bursts };
}

test('two users with the same seed send the same requests apart from the fetch set', { skip, timeout: 120000 }, async () => {
  const x = await runSession(42);
  const y = await runSession(42);
  const show = (s) => s.transcript.map((e) => `${e.at.toFixed(0).padStart(7)} ${e.party.padEnd(10)} ${e.what}`).join('\n');
  const kinds = (s) => {
    const m = new Map();
    for (const e of s.transcript) {
      const k = `${e.party} | ${e.what}`;
      if (!m.has(k)) m.set(k, []);
      m.get(k).push(e.at);
    }
    return m;
  };
  const kx = kinds(x);
  const ky = kinds(y);
  assert.ok(kx.size > 0 && [...kx.keys()].some((k) => k.startsWith('relayer')), 'the transcript holds relayer calls');
  assert.ok([...kx.keys()].some((k) => k.includes('/v1/tokens/issue')), 'the transcript holds the refill');
  for (const kind of new Set([...kx.keys(), ...ky.keys()])) {
    const tx = kx.get(kind) || [];
    const ty = ky.get(kind) || [];
    // One session may start up to the tolerance later than the other (its keys and stores took
    // longer to set up): requests repeated on a timer may then be cut off by the end of the
    // window for one user only, but only within the tolerance of that end.
    const [longer, shorter] = tx.length >= ty.length ? [tx, ty] : [ty, tx];
    const extra = longer.slice(shorter.length);
    assert.ok(extra.every((t) => t > END - TOLERANCE_MS), `${kind}: ${tx.length} times for one user, ${ty.length} for the other\n--- user x\n${show(x)}\n--- user y\n${show(y)}`);
    for (let i = 0; i < Math.min(tx.length, ty.length); i++) {
      assert.ok(Math.abs(tx[i] - ty[i]) <= TOLERANCE_MS, `${kind}: at ${tx[i].toFixed(0)} ms for one user, ${ty[i].toFixed(0)} ms for the other`);
    }
  }
  for (const s of [x, y]) {
    assert.ok(s.bursts.length > 0, 'the scans fetched batches');
    for (const b of s.bursts) {
      assert.deepEqual([...b.timestamps].sort((p, q) => p - q), [...b.fetched].sort((p, q) => p - q), 'a fetch burst reads the timestamps of all its blocks and no other');
    }
  }
});
