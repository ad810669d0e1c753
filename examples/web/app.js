// The privsvc web example: connect a wallet (an injected provider, else a dev wallet on the
// devnet), write a record, list mine, prove ownership of one. Served by
// `cargo run --release --example local_stack -- --serve` at the "web page" URL it prints.
import { browserTokenStore, createPrivateClient, devWallet, verifyOwnershipProof } from '/privsvc/index.js';

const $ = (id) => document.getElementById(id);

// Everything shown here that a relayer, the ledger or an error supplied is inserted as text
// (textContent, DOM nodes), never as HTML: a relayer's /v1/info or an error message could carry
// markup.

/** An element `tag` with `className` and text `text`. */
function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

/** Replaces the content of element `id` with `parts` (strings become text, nodes stay). */
function show(id, ...parts) {
  $(id).replaceChildren(...parts.map((p) => (typeof p === 'string' ? document.createTextNode(p) : p)));
}

/** An error as text, in red. */
function failure(e) {
  return el('span', 'bad', `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : String(e)}`);
}
const config = await fetch('/config.json').then((r) => r.json());
const rpc = new URL('/rpc', location.href).href;
// `?relayer=URL` uses that relayer, directly (it has no heartbeat the OHTTP relay could check),
// instead of the stack's relayer A through the relay (the Chromium test points it at a relayer
// whose /v1/info carries markup).
const chosen = new URLSearchParams(location.search).get('relayer');
const relayer = chosen || config.relayers[0];
let client;
let store;

function short(x) {
  return x.length > 14 ? `${x.slice(0, 8)}…${x.slice(-4)}` : x;
}

function wallet() {
  if (window.ethereum && !new URLSearchParams(location.search).has('dev')) return { w: window.ethereum, kind: 'injected wallet' };
  // A dev wallet for the devnet; its key stays in this tab's session storage.
  let key = sessionStorage.getItem('privsvc:dev-key');
  if (!key) {
    const b = crypto.getRandomValues(new Uint8Array(32));
    key = `0x${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
    sessionStorage.setItem('privsvc:dev-key', key);
  }
  return { w: devWallet(key), kind: 'dev wallet' };
}

$('connect').onclick = async () => {
  $('connect').disabled = true;
  $('wallet').textContent = 'asking the wallet for the key-derivation signature (twice)…';
  try {
    const { w, kind } = wallet();
    store = browserTokenStore(); // unspent tokens survive a reload (IndexedDB, sealed; the default store)
    client = await createPrivateClient({
      app: config.app,
      wallet: w,
      publicClient: rpc,
      // Relayer A of the local stack requires tokens: the page shows the whole path (tokens
      // fetched with the wallet, kept in IndexedDB, spent through the OHTTP relay).
      relayers: [relayer],
      ohttpRelay: chosen ? undefined : config.ohttpRelay,
      tokenMinAgeMs: 2000, // the devnet demo's token age; the default is 60 s
      tokenMaxRipeMs: 4000, // ... and this session's tokens ripen by 4 s (the default: 60 min)
      tokenStore: store,
      delayMs: [0, 500],
      pollMs: 500,
      // The demo's session timers (a tail every 200-500 ms, the first token refill at once);
      // the defaults (a tail every 15-45 s, refills within 10 min) are for real use.
      schedule: config.schedule,
    });
    const address = (await w.request({ method: 'eth_accounts' }))[0];
    show('wallet', el('span', 'ok', 'connected'), ` ${kind} `, el('code', '', short(address)), `, keys in ${client.vault.isolated ? 'a WorkerVault (a Web Worker)' : 'a KeyVault (this page)'}`);
    showRelayers();
    $('list').disabled = false;
    await tokenReady();
    $('write').disabled = false;
  } catch (e) {
    show('wallet', failure(e));
    $('connect').disabled = false;
  }
};

$('write').onclick = async () => {
  $('write').disabled = true;
  $('written').textContent = 'sealing and sending…';
  try {
    const r = await client.createEntity({
      payload: new TextEncoder().encode($('text').value),
      contentType: 'text/plain',
      attributes: { kind: $('kind').value },
      expires: 86400,
      encrypt: $('encrypt').checked,
    });
    const warn = r.warnings.length ? ` warnings: ${r.warnings.map((w) => w.code).join(', ')}` : '';
    const tokens = store.stored(config.app).length;
    show(
      'written',
      el('span', 'ok', 'written'),
      ' entity ',
      el('code', '', short(r.entityKey)),
      ' by one-time owner ',
      el('code', '', short(r.owner)),
      `, batch of ${r.batchSize}, with a token through the OHTTP relay (${tokens} unspent in this browser).${warn}`,
    );
    await list({ refresh: false });
  } catch (e) {
    show('written', failure(e));
  } finally {
    $('write').disabled = false;
  }
};

/**
 * A write spends only a token obtained before it was requested (else NoTokenReady): with a
 * relayer that requires tokens, wait for the session's first refill to ripen.
 */
async function tokenReady() {
  if (!client.relayers().some((r) => r.info && r.info.tokensRequired)) return;
  show('written', 'waiting for a ripe token (the session fetches tokens on its own schedule)…');
  while (client.ripeTokens() === 0) await new Promise((r) => setTimeout(r, 200));
  show('written', `${client.ripeTokens()} tokens ready`);
}

async function list({ refresh = true } = {}) {
  // A record this session wrote is listed at once (verified: false until a scheduled scan
  // verifies it); `refresh` waits for the session's next scan, with no request of its own.
  const mine = await client.myEntities({ refresh });
  $('count').textContent = `${mine.length} record${mine.length === 1 ? '' : 's'}`;
  const body = $('records').tBodies[0];
  body.replaceChildren();
  for (const r of mine) {
    const tr = document.createElement('tr');
    tr.dataset.entity = r.entityKey;
    const cells = [short(r.entityKey), r.toText(), String(r.attributes.kind ?? ''), `block ${r.createdAt}${r.verified ? '' : ' (unverified)'}`];
    for (const c of cells) {
      const td = document.createElement('td');
      td.textContent = c;
      tr.append(td);
    }
    const td = document.createElement('td');
    const b = document.createElement('button');
    b.textContent = 'prove';
    b.className = 'prove';
    b.onclick = () => prove(r.entityKey);
    td.append(b);
    tr.append(td);
    body.append(tr);
  }
}
$('list').onclick = () => list();

async function prove(entityKey) {
  const challenge = crypto.randomUUID();
  const proof = await client.proveOwnership(entityKey, { challenge, verifier: location.host });
  const verdict = await verifyOwnershipProof(proof, { challenge, verifier: location.host, client });
  const line = el('div');
  line.append(verdict.ok ? el('span', 'ok', 'proof verified against the ledger') : el('span', 'bad', verdict.reason));
  show('proof', line, el('pre', '', JSON.stringify(proof, null, 2)));
}

/** The relayers in use and what their /v1/info says (relayer-supplied text, shown as text). */
function showRelayers() {
  const body = $('relayers').tBodies[0];
  body.replaceChildren();
  for (const r of client.relayers()) {
    const info = r.info || {};
    const tr = document.createElement('tr');
    const issuer = info.tokensRequired ? `tokens from ${info.issuerUrl ?? '?'}` : 'no tokens';
    for (const c of [r.url, short(r.address ?? ''), info.version ?? '', issuer, info.ohttpKey ? 'OHTTP' : '']) tr.append(el('td', '', c));
    body.append(tr);
  }
}

// Ready: the script above awaited the wasm module and the stack's configuration, and a click
// before its handler was installed did nothing; the button starts disabled for that reason.
$('connect').disabled = false;
$('wallet').textContent = 'not connected';
