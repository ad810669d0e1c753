// The privsvc web example: connect a wallet (an injected provider, else a dev wallet on the
// devnet), write a record, list mine, prove ownership of one. Served by
// `cargo run --release --example local_stack -- --serve` at the "web page" URL it prints.
import { browserTokenStore, createPrivateClient, devWallet, verifyOwnershipProof } from '/privsvc/index.js';

const $ = (id) => document.getElementById(id);
const config = await fetch('/config.json').then((r) => r.json());
const rpc = new URL('/rpc', location.href).href;
let client;

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
    client = await createPrivateClient({
      app: config.app,
      wallet: w,
      publicClient: rpc,
      // Relayer A of the local stack requires tokens: the page shows the whole path (tokens
      // fetched with the wallet, kept in localStorage, spent through the OHTTP relay).
      relayers: [config.relayers[0]],
      ohttpRelay: config.ohttpRelay,
      tokenMinAgeMs: 2000, // the devnet demo's token age; the default is 60 s
      tokenStore: browserTokenStore(), // unspent tokens survive a reload (localStorage)
      delayMs: [0, 500],
      pollMs: 500,
    });
    const address = (await w.request({ method: 'eth_accounts' }))[0];
    $('wallet').innerHTML = `<span class="ok">connected</span> ${kind} <code>${short(address)}</code>, keys in ${client.vault.constructor.name}`;
    $('write').disabled = false;
    $('list').disabled = false;
  } catch (e) {
    $('wallet').innerHTML = `<span class="bad">${e.name}: ${e.message}</span>`;
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
    const tokens = browserTokenStore().list(config.app).length;
    $('written').innerHTML = `<span class="ok">written</span> entity <code>${short(r.entityKey)}</code> by one-time owner <code>${short(r.owner)}</code>, batch of ${r.batchSize}, with a token through the OHTTP relay (${tokens} unspent in this browser).${warn}`;
    await list();
  } catch (e) {
    $('written').innerHTML = `<span class="bad">${e.name}: ${e.message}</span>`;
  } finally {
    $('write').disabled = false;
  }
};

async function list() {
  const mine = await client.myEntities();
  $('count').textContent = `${mine.length} record${mine.length === 1 ? '' : 's'}`;
  const body = $('records').tBodies[0];
  body.replaceChildren();
  for (const r of mine) {
    const tr = document.createElement('tr');
    tr.dataset.entity = r.entityKey;
    const cells = [short(r.entityKey), r.toText(), String(r.attributes.kind ?? ''), `block ${r.createdAt}`];
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
$('list').onclick = list;

async function prove(entityKey) {
  const challenge = crypto.randomUUID();
  const proof = await client.proveOwnership(entityKey, { challenge, verifier: location.host });
  const verdict = await verifyOwnershipProof(proof, { challenge, verifier: location.host, client });
  $('proof').innerHTML = `<div>${verdict.ok ? '<span class="ok">proof verified against the ledger</span>' : `<span class="bad">${verdict.reason}</span>`}</div><pre></pre>`;
  $('proof').querySelector('pre').textContent = JSON.stringify(proof, null, 2);
}
