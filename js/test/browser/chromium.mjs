// The headless Chromium test: drives examples/web (served by `local_stack --serve`) with
// puppeteer-core over the DevTools protocol, runs in-page checks of the package, measures tag
// opens/s, and saves a screenshot of the page after a write, a listing and a proof: to
// PRIVSVC_SCREENSHOT when set (`PRIVSVC_SCREENSHOT=docs/web-screenshot.png` refreshes the
// committed one), else to target/web-screenshot.png, so a run leaves the checkout unchanged.
// Also runs README's example as js/test/apps/build.mjs bundled it (Vite, webpack), when built.
// Prints "N passed, N failed"; exits 1 on a failure.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, extname, join, resolve, sep } from 'node:path';
import puppeteer from 'puppeteer-core';
import { devWallet } from 'privsvc';

const url = process.env.PRIVSVC_WEB_URL;
if (!url) {
  console.error('PRIVSVC_WEB_URL is not set: run scripts/js-test.sh');
  process.exit(2);
}
const repo = new URL('../../../', import.meta.url).pathname;
const screenshot = resolve(repo, process.env.PRIVSVC_SCREENSHOT || 'target/web-screenshot.png');
mkdirSync(dirname(screenshot), { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'privsvc-chromium-'));
const browser = await puppeteer.launch({
  executablePath: process.env.PRIVSVC_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  userDataDir: profile,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
});

/** An HTTP server on 127.0.0.1 with `handler(req, res, body)`: `{ server, url }`. */
function listen(handler) {
  return new Promise((resolve) => {
    const server = createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      try {
        await handler(req, res, Buffer.concat(chunks));
      } catch (e) {
        res.writeHead(500).end(String(e));
      }
    });
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` }));
  });
}

/** Forwards a request to `target` and its answer back (status, content type, body), with the `extra` headers. */
async function forward(res, target, req, body, extra = {}) {
  const up = await fetch(target, {
    method: req.method,
    headers: req.headers['content-type'] ? { 'content-type': req.headers['content-type'] } : {},
    body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    redirect: 'manual',
  });
  const headers = { ...extra };
  const type = up.headers.get('content-type');
  if (type) headers['content-type'] = type;
  res.writeHead(up.status, headers).end(Buffer.from(await up.arrayBuffer()));
}

/**
 * A static server of the files under `dir` (`/` is index.html) that serves its scripts with each
 * key of `hosts` replaced by its value (README's public URLs by the stack's, as a deployment
 * configures an app); `replaced` counts the replacements of each key.
 */
async function serveDir(dir, hosts) {
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
  const replaced = Object.fromEntries(Object.keys(hosts).map((k) => [k, 0]));
  const served = await listen((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = resolve(dir, `.${path === '/' ? '/index.html' : path}`);
    if (!file.startsWith(dir + sep) || !existsSync(file) || !statSync(file).isFile()) return res.writeHead(404).end();
    let body = readFileSync(file);
    if (extname(file) === '.js') {
      let text = body.toString('utf8');
      for (const [from, to] of Object.entries(hosts)) {
        replaced[from] += text.split(from).length - 1;
        text = text.replaceAll(from, to);
      }
      body = Buffer.from(text);
    }
    res.writeHead(200, { 'content-type': types[extname(file)] || 'application/octet-stream' }).end(body);
  });
  return { ...served, replaced };
}

const config = await (await fetch(`${url}/config.json`)).json();
const rpcUrl = process.env.PRIVSVC_RPC_URL;
const chainId = Number((await (await fetch(rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }) })).json()).result);

// A relayer whose /v1/info carries markup in a text field (and whose /broken/v1/info fails with
// markup in the body), recording the headers of every request it gets. CORS open, as relayers.
const XSS = '<img src=x onerror="window.__privsvcXss = (window.__privsvcXss || 0) + 1">';
const hostileHits = [];
const hostile = await listen((req, res) => {
  hostileHits.push({ path: req.url, headers: req.headers });
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*', 'access-control-allow-methods': 'GET, POST' };
  if (req.method === 'OPTIONS') return res.writeHead(204, cors).end();
  if (req.url === '/v1/info') {
    return res.writeHead(200, { ...cors, 'content-type': 'application/json' }).end(JSON.stringify({
      address: '0x00000000000000000000000000000000000000a1', version: 'privsvc-relayer/1', chainId,
      minBatch: 1, maxWaitMs: 1000, minIntervalBlocks: 1, tokensRequired: true,
      issuer: '0x00000000000000000000000000000000000000a2', issuerUrl: XSS, maxMinAnonymity: 10, maxHoldMs: 60000,
    }));
  }
  if (req.url === '/broken/v1/info') return res.writeHead(500, { ...cors, 'content-type': 'text/plain' }).end(XSS);
  res.writeHead(404, cors).end();
});

// The app's own origin with a relayer and the RPC behind reverse-proxy paths (what SECURITY.md
// advises to hide Origin): records the headers of every request to /relayer and /rpc.
const proxied = [];
const wasmFetches = [];
const sameOrigin = await listen(async (req, res, body) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (path === '/') return res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><meta charset="utf-8"><title>app</title><p>app</p>');
  if (path.startsWith('/privsvc/')) return forward(res, `${url}${path}`, req, body);
  // The package with a worker that does not load (404) or never answers: what an app meets when
  // a bundler mishandles worker.js.
  if (path === '/broken-worker/privsvc/worker.js') return res.writeHead(404).end();
  if (path === '/silent-worker/privsvc/worker.js') return res.writeHead(200, { 'content-type': 'text/javascript' }).end('self.onmessage = () => {};');
  // The package as served, every fetch of its wasm module counted and never cached.
  const counted = path.match(/^\/counted(\/privsvc\/.*)$/);
  if (counted) {
    if (counted[1].endsWith('.wasm')) wasmFetches.push(counted[1]);
    return forward(res, `${url}${counted[1]}`, req, body, { 'cache-control': 'no-store' });
  }
  const copy = path.match(/^\/(?:broken|silent)-worker(\/privsvc\/.*)$/);
  if (copy) return forward(res, `${url}${copy[1]}`, req, body);
  if (path === '/rpc') {
    proxied.push({ path, headers: req.headers });
    return forward(res, rpcUrl, req, body);
  }
  if (path.startsWith('/relayer/')) {
    proxied.push({ path, headers: req.headers });
    return forward(res, `${config.relayers[1]}${path.slice('/relayer'.length)}`, req, body);
  }
  res.writeHead(404).end();
});

/** Mines `n` empty blocks on the stack's devnet. */
async function mine(n) {
  const res = await fetch(process.env.PRIVSVC_RPC_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: [`0x${n.toString(16)}`] }),
  });
  const body = await res.json();
  if (body.error) throw new Error(`anvil_mine: ${body.error.message}`);
}

/** Mines 32 empty blocks: a scan fetches every batch so far. */
async function settle() {
  await mine(32);
}

/** In each test page: `__idbKeys(db)` lists the keys of a store database, `__idbRewrite` replaces values. */
const idbHelpers = () => {
  // Only a database that exists (opening another would create it, without its object store).
  const open = async (name) => {
    if (!(await indexedDB.databases()).some((d) => d.name === name)) return undefined;
    return new Promise((ok, no) => {
      const r = indexedDB.open(name);
      r.onsuccess = () => ok(r.result);
      r.onerror = () => no(r.error);
    });
  };
  const all = async (name, what) => {
    const db = await open(name);
    if (!db) return [];
    try {
      if (!db.objectStoreNames.contains('parts')) return [];
      return await new Promise((ok) => {
        const r = db.transaction('parts').objectStore('parts')[what]();
        r.onsuccess = () => ok(r.result);
      });
    } finally {
      db.close();
    }
  };
  window.__idbKeys = (name) => all(name, 'getAllKeys');
  /** Replaces the value of each key of `name` that `pick(key)` names with `make(key, value)`. */
  window.__idbRewrite = async (name, pick, make) => {
    const db = await open(name);
    if (!db) return [];
    try {
      if (!db.objectStoreNames.contains('parts')) return [];
      const keys = await new Promise((ok) => {
        const r = db.transaction('parts').objectStore('parts').getAllKeys();
        r.onsuccess = () => ok(r.result);
      });
      const done = [];
      for (const k of keys.filter(pick)) {
        const value = await new Promise((ok) => {
          const r = db.transaction('parts').objectStore('parts').get(k);
          r.onsuccess = () => ok(r.result);
        });
        await new Promise((ok, no) => {
          const t = db.transaction('parts', 'readwrite');
          t.objectStore('parts').put(make(k, value), k);
          t.oncomplete = ok;
          t.onerror = () => no(t.error);
        });
        done.push(k);
      }
      return done;
    } finally {
      db.close();
    }
  };
};

/** A new tab with the IndexedDB helpers. */
async function openPage() {
  const p = await browser.newPage();
  await p.evaluateOnNewDocument(idbHelpers);
  return p;
}

let passed = 0;
let failed = 0;
/** PRIVSVC_CHROMIUM_ONLY (a regular expression): run only the checks whose name matches. */
const only = process.env.PRIVSVC_CHROMIUM_ONLY ? new RegExp(process.env.PRIVSVC_CHROMIUM_ONLY) : undefined;
async function check(name, fn) {
  if (only && !only.test(name)) return;
  const t0 = Date.now();
  try {
    await fn();
    passed += 1;
    console.log(`ok - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`not ok - ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
function assert(cond, what) {
  if (!cond) throw new Error(what);
}

/**
 * Clicks the example page's Connect button once the page's script has installed its handler:
 * the script awaits the wasm module (top-level await), which the page's `load` event does not
 * wait for, so on a loaded machine a click right after `load` reached no handler.
 */
async function connect(p) {
  // The page enables Connect once its script (which awaits the wasm module) installed the handler.
  await p.waitForFunction(() => {
    const b = document.getElementById('connect');
    return typeof b.onclick === 'function' && !b.disabled;
  }, { timeout: 60000 });
  await p.click('#connect');
}

try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 900 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.evaluateOnNewDocument(idbHelpers);
  await page.goto(`${url}/?dev`, { waitUntil: 'load' });

  await check('the page connects a dev wallet with keys in a WorkerVault', async () => {
    await connect(page);
    // Not the line's first text, "not connected".
    await page.waitForFunction(() => /^connected|Error/.test(document.getElementById('wallet').textContent.trim()), { timeout: 60000 });
    const text = await page.$eval('#wallet', (e) => e.textContent);
    assert(text.includes('connected') && text.includes('WorkerVault'), `wallet line: ${text}`);
  });

  await check('the page writes a record and lists it', async () => {
    await page.$eval('#text', (e) => { e.value = 'written in Chromium'; });
    // The button is enabled once the session holds a ripe token.
    await page.waitForFunction(() => !document.getElementById('write').disabled, { timeout: 60000 });
    await page.click('#write');
    await page.waitForFunction(() => /written|Error/.test(document.getElementById('written').textContent), { timeout: 120000 });
    const text = await page.$eval('#written', (e) => e.textContent);
    assert(text.startsWith('written'), `write line: ${text}`);
    // A scan fetches a batch once 16 blocks followed it: mine them, then list again.
    await settle();
    await page.click('#list');
    await page.waitForFunction(() => document.querySelectorAll('#records tbody tr').length > 0, { timeout: 60000 });
    const rows = await page.$$eval('#records tbody tr', (trs) => trs.map((tr) => tr.textContent));
    assert(rows.some((r) => r.includes('written in Chromium')), `rows: ${rows}`);
    // Relayer A requires tokens: the session fetched some into the browser store (IndexedDB,
    // sealed: this tab's lease).
    await page.waitForFunction(async () => (await window.__idbKeys('privsvc-store')).some((k) => /^[0-9a-f]{32}\/lease\//.test(k)), { timeout: 30000 });
  });

  await check('the page makes a proof that verifies against the ledger', async () => {
    // Clicked in the page in one step: the write's own listing may still redraw the table
    // (the page lists after a write, the test lists again), detaching a button found earlier.
    await page.$eval('#records tbody tr button.prove', (b) => b.click());
    await page.waitForFunction(() => /verified|proof|Error/.test(document.getElementById('proof').textContent) && document.querySelector('#proof pre'), { timeout: 60000 });
    const text = await page.$eval('#proof', (e) => e.textContent);
    assert(text.includes('proof verified against the ledger'), `proof: ${text.slice(0, 200)}`);
    await page.screenshot({ path: screenshot, fullPage: true });
    assert(statSync(screenshot).size > 10000, `screenshot ${screenshot} is missing or empty`);
    console.log(`# screenshot: ${screenshot}`);
  });

  await check('in the browser: a non-deterministic wallet is refused, tokens persist in IndexedDB (sealed), workers by default', async () => {
    const r = await page.evaluate(async () => {
      const m = await import('/privsvc/index.js');
      const base = m.devWallet();
      let n = 0;
      const flaky = { request: async (a) => (a.method === 'eth_signTypedData_v4' && ++n === 2 ? m.devWallet().request(a) : base.request(a)) };
      let refused = '';
      try {
        await m.KeyVault.fromWallet(flaky, 'notes');
      } catch (e) {
        refused = e instanceof m.NonDeterministicWalletError ? e.name : `wrong: ${e}`;
      }
      // The page's store: its parts, sealed, under a store id that names no wallet.
      const keys = await window.__idbKeys('privsvc-store');
      const parts = [];
      const db = await new Promise((ok) => {
        const q = indexedDB.open('privsvc-store');
        q.onsuccess = () => ok(q.result);
      });
      for (const k of keys) {
        parts.push(await new Promise((ok) => {
          const q = db.transaction('parts').objectStore('parts').get(k);
          q.onsuccess = () => ok({ key: k, head: new TextDecoder().decode(q.result.subarray(0, 8)), text: new TextDecoder().decode(q.result) });
        }));
      }
      db.close();
      const v = await m.vaultFromWallet(m.devWallet(), 'notes');
      const kind = { worker: v instanceof m.WorkerVault, isolated: v.isolated };
      v.terminate();
      return { refused, parts, kind, inBrowser: m.inBrowser, localStorage: Object.keys(localStorage) };
    });
    assert(r.refused === 'NonDeterministicWalletError', `refused: ${r.refused}`);
    const slots = r.parts.map((p) => p.key.replace(/^[0-9a-f]{32}\//, ''));
    assert(slots.includes('pins') && slots.includes('scan') && slots.some((k) => k.startsWith('lease/')), `parts: ${slots}`);
    const sealedParts = r.parts.filter((p) => !p.key.endsWith('/scan'));
    assert(sealedParts.every((p) => p.head === 'PSVCDEV1' && !/nonce|signature|http/.test(p.text)), 'a part is not sealed');
    assert(r.localStorage.every((k) => !k.startsWith('privsvc')), `localStorage: ${r.localStorage}`);
    assert(r.kind.worker && r.kind.isolated === true && r.inBrowser === true, `vault kind ${JSON.stringify(r.kind)}`);
  });

  await check('a key worker that does not start fails createPrivateClient with the reason; keys go into the page only when asked', async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${sameOrigin.url}/`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/broken-worker/privsvc/index.js');
        const options = { app: 'notes', publicClient: `${location.origin}/rpc`, relayers: [`${location.origin}/relayer`] };
        let refused = '';
        try {
          const c = await m.createPrivateClient({ ...options, wallet: m.devWallet() });
          refused = `created, keys in ${c.vault.isolated ? 'a worker' : 'the page'}`;
          c.close();
        } catch (e) {
          refused = `${e.name}: ${e.message}`;
        }
        const asked = await m.createPrivateClient({ ...options, wallet: m.devWallet(), isolateKeys: false });
        const inPage = { isolated: asked.vault.isolated, keyVault: asked.vault instanceof m.KeyVault };
        asked.close();
        const s = await import('/silent-worker/privsvc/index.js');
        let late = '';
        const t0 = performance.now();
        try {
          await s.WorkerVault.spawn({ timeoutMs: 1500 });
        } catch (e) {
          late = `${e.name}: ${e.message}`;
        }
        return { refused, inPage, late, waited: performance.now() - t0 };
      });
      assert(/^PrivsvcError: the vault worker failed: its script did not load/.test(r.refused), `refused: ${r.refused}`);
      assert(r.inPage.isolated === false && r.inPage.keyVault, `isolateKeys: false: ${JSON.stringify(r.inPage)}`);
      assert(r.late === 'PrivsvcError: the vault worker did not answer within 1500 ms' && r.waited >= 1400, `silent worker: ${r.late} after ${r.waited} ms`);
    } finally {
      await p.close();
    }
  });

  await check('the vault worker starts with the page\'s compiled module: one fetch of the wasm module per page', async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${sameOrigin.url}/`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/counted/privsvc/index.js');
        const v = await m.vaultFromWallet(m.devWallet(), 'notes');
        const ref = await v.scopeRecord('wasm-once');
        const opened = await v.openTags([await v.makeTag(ref)]);
        v.terminate();
        return { isolated: v.isolated, opened: opened[0] === ref };
      });
      assert(r.isolated === true && r.opened, `worker vault: ${JSON.stringify(r)}`);
      assert(wasmFetches.length === 1, `the wasm module was fetched ${wasmFetches.length} times: ${wasmFetches}`);
    } finally {
      await p.close();
    }
  });

  await check('a page of another origin reads the devnet\'s JSON-RPC (CORS preflight answered)', async () => {
    const other = await listen((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>another origin</title>'));
    const p = await browser.newPage();
    try {
      await p.goto(`${other.url}/`, { waitUntil: 'load' });
      const got = await p.evaluate(async (rpc) => {
        const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }) });
        return (await res.json()).result;
      }, rpcUrl);
      assert(Number(got) === chainId, `eth_chainId from another origin: ${got}`);
    } finally {
      await p.close();
      other.server.close();
    }
  });

  const apps = join(repo, 'js/test/apps/build');
  if (existsSync(join(apps, 'vite/index.html')) && existsSync(join(apps, 'webpack/index.html'))) {
    await check('README\'s example bundled by Vite and by webpack: writes, lists, proves against the stack, keys in a WorkerVault', async () => {
      const builds = ['vite', 'webpack'];
      const hosts = {
        'https://rpc.tiramisu.db-chain.testnet.arkiv.network': rpcUrl,
        'https://relay.example': process.env.PRIVSVC_OHTTP_RELAY,
      };
      const servers = await Promise.all(builds.map((b) => serveDir(join(apps, b), hosts)));
      // A record is listed once 16 blocks followed its batch; the devnet mines only on demand.
      const mining = setInterval(() => mine(2).catch(() => {}), 1000);
      /** Runs one build in a tab with an injected wallet (a dev wallet, here in Node.js). */
      const run = async (name, appUrl) => {
        const p = await browser.newPage();
        const problems = [];
        p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
        p.on('console', (m) => {
          if (m.type() === 'warn' || m.type() === 'warning' || m.type() === 'error') problems.push(`console ${m.type()}: ${m.text()}`);
        });
        try {
          const wallet = devWallet();
          await p.exposeFunction('__privsvcTestWallet', (args) => wallet.request(args));
          await p.evaluateOnNewDocument(() => {
            window.ethereum = { request: (args) => window.__privsvcTestWallet(args) };
          });
          const t0 = Date.now();
          await p.goto(`${appUrl}/`, { waitUntil: 'load' });
          while (!(await p.evaluate(() => window.__privsvcApp !== undefined))) {
            if (problems.some((x) => x.startsWith('page error'))) throw new Error(`${name}: ${problems.join(' | ')}`);
            if (Date.now() - t0 > 240000) throw new Error(`${name}: the example did not finish in 240 s`);
            await new Promise((r) => setTimeout(r, 250));
          }
          const app = await p.evaluate(() => window.__privsvcApp);
          const workers = p.workers().map((w) => w.url());
          return { name, app, workers, problems, ms: Date.now() - t0, origin: new URL(appUrl).origin };
        } finally {
          await p.close();
        }
      };
      let results;
      try {
        results = await Promise.all(builds.map((b, i) => run(b, servers[i].url)));
      } finally {
        clearInterval(mining);
        for (const s of servers) s.server.close();
      }
      servers.forEach((s, i) => assert(Object.values(s.replaced).every((n) => n === 1), `${builds[i]}: README's URLs served ${JSON.stringify(s.replaced)} times, once each expected`));
      for (const { name, ms, workers } of results) console.log(`# ${name} app: README's example ran in ${ms} ms; workers ${workers.join(', ')}`);
      for (const { name, app, workers, problems, origin } of results) {
        assert(app.workerVault === true && app.isolated === true, `${name}: keys not in a WorkerVault: ${JSON.stringify(app)}`);
        assert(workers.length === 1 && workers[0].startsWith(`${origin}/`), `${name}: the key worker is not a bundled file of the app: ${workers}`);
        assert(app.listed.length === 1 && app.listed[0] === 'hello', `${name}: listed ${JSON.stringify(app.listed)}`);
        assert(app.verdict && app.verdict.ok === true, `${name}: proof ${JSON.stringify(app.verdict)}`);
        assert(app.proofOwner.toLowerCase() === app.writtenOwner.toLowerCase(), `${name}: the proof's owner ${app.proofOwner}, the record's ${app.writtenOwner}`);
        assert(problems.length === 0, `${name}: ${problems.join(' | ')}`);
      }
    });
  } else {
    await check('README\'s example bundled by Vite and by webpack', async () => {
      throw new Error(`no builds in ${apps}: run js/test/apps/build.mjs first (scripts/js-test.sh does)`);
    });
  }

  await check('the scan cache is kept in the device store (IndexedDB) by default: a returning session resumes, another root has its own', async () => {
    const session = (key) =>
      page.evaluate(async (key) => {
        const m = await import('/privsvc/index.js');
        const cfg = await fetch('/config.json').then((x) => x.json());
        const c = await m.createPrivateClient({
          app: cfg.app,
          project: 'scan-cache-check',
          wallet: m.devWallet(key),
          publicClient: new URL('/rpc', location.href).href,
          relayers: [cfg.relayers[1]],
          schedule: cfg.schedule,
          scanCacheResumeBlocks: 4,
        });
        await c.myEntities();
        const state = { ...c.scanCache, store: c.deviceStore };
        c.close();
        return state;
      }, key);
    const me = `0x${'5'.repeat(64)}`;
    const first = await session(me);
    assert(first.state === 'empty' && first.store.kind === 'indexeddb', `first session: ${JSON.stringify(first)}`);
    await settle();
    const second = await session(me);
    assert(second.state === 'resumed' && second.block % 4 === 0 && second.store.id === first.store.id, `second session: ${JSON.stringify(second)}`);
    const stranger = await session(`0x${'6'.repeat(64)}`);
    assert(stranger.state === 'empty' && stranger.store.id !== first.store.id, `another root: ${JSON.stringify(stranger)}`);
    const stored = await page.evaluate(() => window.__idbKeys('privsvc-store'));
    assert(stored.includes(`${first.store.id}/scan`) && stored.includes(`${stranger.store.id}/scan`), `IndexedDB keys: ${stored}`);
  });

  await check('the session\'s start reads the chain id, opens the device store\'s database and, with no scan cache on the device, lists while the wallet signs', async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${url}/`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/privsvc/index.js');
        const cfg = await fetch('/config.json').then((x) => x.json());
        // A device store of its own: no scan cache of any user yet.
        const storeName = `early${Date.now()}`;
        const keysOf = (db) =>
          new Promise((resolve, reject) => {
            const req = indexedDB.open(db);
            req.onerror = () => reject(req.error);
            req.onsuccess = () => {
              const all = req.result.transaction('parts', 'readonly').objectStore('parts').getAllKeys();
              all.onsuccess = () => {
                req.result.close();
                resolve(all.result.map(String));
              };
              all.onerror = () => reject(all.error);
            };
          });
        // A wallet whose user takes 300 ms to confirm each signature.
        const dev = m.devWallet(`0x${'8'.repeat(64)}`);
        const session = async () => {
          const t0 = performance.now();
          const at = () => Math.round(performance.now() - t0);
          const seen = { opens: [], chainId: [], listing: [], signed: [], wholeStoreKeyReads: [] };
          const open = indexedDB.open.bind(indexedDB);
          indexedDB.open = (name, version) => {
            seen.opens.push([name, at()]);
            return open(name, version);
          };
          // Reading every key of the store is how a session asks an existing device store
          // whether it keeps a scan cache (the store's own reads name a prefix).
          const getAllKeys = IDBObjectStore.prototype.getAllKeys;
          IDBObjectStore.prototype.getAllKeys = function (...args) {
            if (args[0] === undefined) seen.wholeStoreKeyReads.push(at());
            return getAllKeys.apply(this, args);
          };
          const plain = globalThis.fetch;
          globalThis.fetch = (u, init) => {
            const body = init && typeof init.body === 'string' ? init.body : '';
            if (body.includes('"eth_chainId"')) seen.chainId.push(at());
            if (body.includes('"arkiv_query"') && body.includes("project = str('early-start-check')")) seen.listing.push(at());
            return plain(u, init);
          };
          const wallet = {
            async request(args) {
              if (args.method === 'eth_signTypedData_v4') {
                await new Promise((done) => setTimeout(done, 300));
                const signature = await dev.request(args);
                seen.signed.push(at());
                return signature;
              }
              return dev.request(args);
            },
          };
          try {
            const c = await m.createPrivateClient({
              app: cfg.app,
              project: 'early-start-check',
              wallet,
              publicClient: new URL('/rpc', location.href).href,
              relayers: [cfg.relayers[1]],
              schedule: cfg.schedule,
              tokenStore: m.browserTokenStore(storeName),
            });
            // A scan after the first one: the session keeps its scan cache by then.
            await c.myEntities({ refresh: true });
            c.close();
          } finally {
            indexedDB.open = open;
            IDBObjectStore.prototype.getAllKeys = getAllKeys;
            globalThis.fetch = plain;
          }
          return seen;
        };
        const first = await session();
        const db = `privsvc-store:${storeName}`;
        let keys = await keysOf(db);
        for (let i = 0; i < 100 && !keys.some((k) => k.endsWith('/scan')); i++) {
          await new Promise((done) => setTimeout(done, 100));
          keys = await keysOf(db);
        }
        const returning = await session();
        return { first, returning, keys, db };
      });
      const { first, returning } = r;
      const signed = Math.max(...first.signed);
      const store = first.opens.find(([name]) => name === r.db);
      assert(first.signed.length >= 1, `the wallet signed: ${JSON.stringify(r)}`);
      assert(first.chainId.length >= 1 && first.chainId[0] < signed, `eth_chainId was read after the wallet signed: ${JSON.stringify(r)}`);
      assert(store && store[1] < signed, `the device store's database was opened after the wallet signed: ${JSON.stringify(r)}`);
      assert(first.listing.length >= 1 && first.listing[0] < signed, `with no scan cache on the device, the first listing was sent after the wallet signed: ${JSON.stringify(r)}`);
      assert(r.keys.some((k) => k.endsWith('/scan')), `the first session kept no scan cache: ${JSON.stringify(r.keys)}`);
      // A device store that did not exist yet: no scan cache, known from indexedDB.databases()
      // without waiting for the database to be created and read.
      assert(first.wholeStoreKeyReads.length === 0, `the first session read the new device store's keys to find a scan cache: ${JSON.stringify(first)}`);
      assert(returning.wholeStoreKeyReads.length >= 1, `the returning session did not ask its device store for a scan cache: ${JSON.stringify(returning)}`);
      // A device that keeps a scan cache: the session lists once the vault can open it.
      const signedAgain = Math.max(...returning.signed);
      assert(returning.listing.length >= 1 && returning.listing[0] > signedAgain, `a returning session listed before its vault existed: ${JSON.stringify(returning)}`);
    } finally {
      await p.close();
    }
  });

  await check('tag opens per second in Chromium (printed for docs/BENCHMARKS.md)', async () => {
    const r = await page.evaluate(async () => {
      const m = await import('/privsvc/index.js');
      const { vault: other } = m.KeyVault.random('bench');
      const ref = other.newRecord();
      const tags = Array.from({ length: 10000 }, () => other.makeTag(ref));
      const { vault } = m.KeyVault.random('bench');
      vault.openTags(tags.slice(0, 500));
      const t0 = performance.now();
      const opened = vault.openTags(tags);
      const ms = performance.now() - t0;
      return { perSecond: Math.round(tags.length / (ms / 1000)), none: opened.every((x) => x === undefined) };
    });
    assert(r.none, 'a foreign tag opened');
    console.log(`# chromium tag opens/s: ${r.perSecond}`);
  });

  await check('relayer-supplied text is shown as text: markup in /v1/info and in an error never becomes HTML', async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${url}/?dev&relayer=${encodeURIComponent(hostile.url)}`, { waitUntil: 'load' });
      await connect(p);
      await p.waitForFunction(() => document.querySelectorAll('#relayers tbody tr').length > 0 || /Error/.test(document.getElementById('wallet').textContent), { timeout: 60000 });
      const shown = await p.$eval('#relayers', (e) => e.textContent);
      assert(shown.includes(`tokens from ${'<img src=x onerror='}`), `relayers: ${shown}`);
      await p.goto(`${url}/?dev&relayer=${encodeURIComponent(`${hostile.url}/broken`)}`, { waitUntil: 'load' });
      await connect(p);
      await p.waitForFunction(() => /Error/.test(document.getElementById('wallet').textContent), { timeout: 60000 });
      const line = await p.$eval('#wallet', (e) => e.textContent);
      assert(line.includes('<img src=x onerror='), `wallet line: ${line}`);
      await new Promise((r) => setTimeout(r, 300));
      const r = await p.evaluate(() => ({ imgs: document.querySelectorAll('img').length, xss: window.__privsvcXss ?? 0 }));
      assert(r.imgs === 0 && r.xss === 0, `markup ran: ${JSON.stringify(r)}`);
    } finally {
      await p.close();
    }
  });

  await check('fetches send no Referer and no Cookie (a default fetch, the leaky control, sends both): a same-origin relayer and RPC behind proxy paths, a cross-origin relayer', async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${sameOrigin.url}/`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        document.cookie = 'session=secret-session-cookie; path=/';
        const m = await import('/privsvc/index.js');
        const c = await m.createPrivateClient({
          app: 'notes', vault: m.KeyVault.random('notes').vault, publicClient: `${location.origin}/rpc`,
          relayers: [`${location.origin}/relayer`], delayMs: [0, 0], pollMs: 250, rarityK: 0,
          schedule: { tailMs: [200, 500], scanMs: [300, 800], fetchAgeBlocks: [16, 16] },
        });
        const w = await c.createEntity({ payload: new TextEncoder().encode('no referer'), contentType: 'text/plain', expires: 3600 });
        // Settle (32 empty blocks), then list after the session's next tail.
        await fetch(`${location.origin}/rpc`, { ...m.FETCH_INIT, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: ['0x20'] }) });
        const mine = await c.myEntities({ refresh: true });
        c.close();
        // The leaky setting: a fetch with the platform's defaults (what the package sent before
        // revision 3), marked so that the recorder can tell it apart. It must be caught.
        await fetch(`${location.origin}/relayer/v1/info`, { headers: { 'x-leaky-control': '1' } });
        return { written: w.entityKey, found: mine.some((x) => x.entityKey === w.entityKey), cookie: document.cookie };
      });
      assert(r.found && r.cookie.includes('secret-session-cookie'), JSON.stringify(r));
      const leaky = proxied.filter((x) => x.headers['x-leaky-control'] === '1');
      const own = proxied.filter((x) => x.headers['x-leaky-control'] === undefined);
      assert(leaky.length === 1, `the leaky control reached the recorder ${leaky.length} times`);
      assert(leaky[0].headers.referer && leaky[0].headers.cookie?.includes('secret-session-cookie'),
        `the recorder misses what a default fetch sends: ${JSON.stringify(leaky[0].headers)}`);
      const paths = new Set(own.map((x) => x.path.replace(/\/v1\/records\/.*/, '/v1/records/:id')));
      for (const want of ['/rpc', '/relayer/v1/info', '/relayer/v1/records']) assert(paths.has(want), `no request to ${want}: ${[...paths]}`);
      for (const { path, headers } of [...own, ...hostileHits]) {
        assert(headers.referer === undefined, `${path} got Referer ${headers.referer}`);
        assert(headers.cookie === undefined, `${path} got Cookie ${headers.cookie}`);
      }
      assert(hostileHits.some((x) => x.path === '/v1/info'), 'the cross-origin relayer was asked');
    } finally {
      await p.close();
    }
  });

  await check('two tabs taking tokens from one browserTokenStore never hand out a token twice; a closed tab\'s tokens pass on', async () => {
    const APP = 'notes';
    const key = `0x${'8'.repeat(64)}`;
    const seedPage = await openPage();
    await seedPage.goto(`${url}/?dev`, { waitUntil: 'load' });
    // 20 real tokens from the stack's issuer, kept (sealed) by an earlier session of this user.
    const seeded = await seedPage.evaluate(async (app, key) => {
      const m = await import('/privsvc/index.js');
      const cfg = await (await fetch('/config.json')).json();
      const info = await (await fetch(`${cfg.relayers[0]}/v1/info`)).json();
      const vault = await m.vaultFromWallet(m.devWallet(key), app, { isolateKeys: false });
      const store = m.browserTokenStore('race');
      const w = new m.TokenWallet({ wallet: m.devWallet(), vault, reader: `${location.origin}/rpc`, issuer: info.issuer, issuerUrl: info.issuerUrl, store, minAgeMs: 0, maxRipeMs: 0 });
      await w.acquire(app, 20);
      await store.flush();
      return store.stored(app).map((t) => t.nonce);
    }, APP, key);
    await seedPage.close();
    assert(seeded.length === 20, `seeded ${seeded.length}`);
    const [one, two] = await Promise.all([openPage(), openPage()]);
    await Promise.all([one.goto(`${url}/?dev`, { waitUntil: 'load' }), two.goto(`${url}/?dev`, { waitUntil: 'load' })]);
    const start = Date.now() + 3000;
    // Each tab: the user's vault, a store and a token wallet at once, then at the same moment
    // as the other tab, take up to 12 tokens as fast as it can.
    const race = (page) =>
      page.evaluate(async (app, at, key) => {
        const m = await import('/privsvc/index.js');
        const cfg = await (await fetch('/config.json')).json();
        const info = await (await fetch(`${cfg.relayers[0]}/v1/info`)).json();
        const vault = await m.vaultFromWallet(m.devWallet(key), app, { isolateKeys: false });
        window.store = m.browserTokenStore('race');
        const w = new m.TokenWallet({ wallet: m.devWallet(), vault, reader: `${location.origin}/rpc`, issuer: info.issuer, issuerUrl: info.issuerUrl, store: window.store, minAgeMs: 0, maxRipeMs: 0 });
        window.source = w.source();
        await new Promise((r) => setTimeout(r, at - Date.now()));
        const got = [];
        for (let i = 0; i < 12; i++) {
          const t = await window.source.take(app);
          if (!t) break;
          got.push(t.nonce);
        }
        await window.store.flush();
        return got;
      }, APP, start, key);
    const [a, b] = await Promise.all([race(one), race(two)]);
    const all = [...a, ...b];
    assert(new Set(all).size === all.length, `a token was handed out twice: tab 1 ${a.length}, tab 2 ${b.length}, distinct ${new Set(all).size}`);
    assert(all.length > 0 && all.every((n) => seeded.includes(n)), `a token that was not stored, or none: ${all.length}`);
    // The tab that holds tokens closes: the other one gets them and hands out the rest, once.
    const [holder, other] = a.length >= b.length ? [one, two] : [two, one];
    await holder.close();
    const rest = await other.evaluate(async (app) => {
      const deadline = Date.now() + 20000;
      while (window.store.list(app).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const got = [];
      for (;;) {
        const t = await window.source.take(app);
        if (!t) break;
        got.push(t.nonce);
      }
      return got;
    }, APP);
    await other.close();
    const total = [...all, ...rest];
    assert(new Set(total).size === total.length, `a token was handed out twice after the handover (${total.length} handed out, ${new Set(total).size} distinct)`);
    assert(total.length === seeded.length, `handed out ${total.length} of ${seeded.length}: tokens were lost`);
  });

  await check('pin-poison: a same-origin script plants relayer pins where the package keeps them; a later session does not use them', async () => {
    const p = await openPage();
    try {
      await p.goto(`${url}/?dev`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/privsvc/index.js');
        const cfg = await fetch('/config.json').then((x) => x.json());
        const relayer = cfg.relayers[1];
        const key = `0x${'9'.repeat(64)}`;
        const options = () => ({
          app: cfg.app, project: 'pin-poison', wallet: m.devWallet(key), publicClient: new URL('/rpc', location.href).href,
          relayers: [relayer], tokenStore: m.browserTokenStore('poison'),
        });
        // The user's first session pins the relayer's URL to its real account.
        const first = await m.createPrivateClient(options());
        const real = first.relayerAddresses()[0];
        first.close();
        await new Promise((x) => setTimeout(x, 500));
        // A script of the same origin (another library of the page, an injected script) plants
        // a pin naming another account for that URL wherever the package keeps state.
        const fake = m.devWallet().address;
        const planted = [];
        // localStorage, where browserTokenStore() kept its pool and leases before revision 4.
        for (const k of ['privsvc:tokens:poison', 'privsvc:tokens', ...Object.keys(localStorage).filter((x) => x.startsWith('privsvc:tokens'))]) {
          localStorage.setItem(k, JSON.stringify({ v: 2, seq: 0, tokens: [], keyPins: {}, relayerPins: { [relayer]: fake } }));
          planted.push(k);
        }
        // IndexedDB: every pins part replaced by one sealed under the attacker's own key (the
        // package's own sealing, with a key of its choosing), for this chain and project.
        const raw = await import('/privsvc/pkg/privsvc_wasm.js');
        const chainId = Number(BigInt((await (await fetch('/rpc', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }) })).json()).result));
        if (typeof raw.RawPartSealer === 'function') {
          const forged = new raw.RawPartSealer(crypto.getRandomValues(new Uint8Array(32)), chainId, 'pin-poison')
            .seal(2, new TextEncoder().encode(JSON.stringify({ keys: [], relayers: { [relayer]: fake } })));
          for (const db of await indexedDB.databases()) {
            if (db.name.startsWith('privsvc')) planted.push(...(await window.__idbRewrite(db.name, (k) => String(k).endsWith('/pins'), () => forged)));
          }
        }
        // A later session of the user.
        const warnings = [];
        const warn = console.warn;
        console.warn = (x) => warnings.push(String(x));
        try {
          const later = await m.createPrivateClient(options());
          const used = later.relayerAddresses();
          const discarded = later.deviceStore ? later.deviceStore.discarded : undefined;
          later.close();
          return { real, fake, planted, used, discarded, warnings };
        } catch (e) {
          return { real, fake, planted, refused: `${e.name}: ${e.message}`, warnings };
        } finally {
          console.warn = warn;
        }
      });
      console.log(`# pin-poison: planted ${r.planted.length} (${r.planted.join(', ')}); later session: ${r.refused ? `refused the real relayer (${r.refused})` : `used ${r.used}`}; real ${r.real}, planted ${r.fake}`);
      assert(!r.refused, `the later session used the planted pin and refused the real relayer: ${r.refused}`);
      assert(r.used.length === 1 && r.used[0].toLowerCase() === r.real.toLowerCase(), `the later session used ${r.used}, the relayer's account is ${r.real}`);
      assert(r.planted.some((k) => k.endsWith('/pins')), `nothing planted in IndexedDB: ${r.planted}`);
      assert(r.discarded.includes('pins') && r.warnings.some((x) => /pins does not open under this vault's key/.test(x)), `discarded ${r.discarded}, warnings ${r.warnings}`);
    } finally {
      await p.close();
    }
  });

  await check('the device store persists in IndexedDB: a later session spends the earlier session\'s tokens at once; a planted or altered part is discarded', async () => {
    const p = await openPage();
    try {
      await p.goto(`${url}/?dev`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/privsvc/index.js');
        const cfg = await fetch('/config.json').then((x) => x.json());
        const key = `0x${'a'.repeat(64)}`;
        const options = (schedule) => ({
          app: cfg.app, project: 'persist', wallet: m.devWallet(key), publicClient: new URL('/rpc', location.href).href,
          relayers: [cfg.relayers[0]], tokenMinAgeMs: 500, tokenMaxRipeMs: 1000, delayMs: [0, 0], pollMs: 250, rarityK: 0,
          schedule: { ...cfg.schedule, ...schedule }, tokenStore: m.browserTokenStore('persist'),
        });
        const first = await m.createPrivateClient(options({}));
        const deadline = Date.now() + 30000;
        while (first.ripeTokens() === 0 && Date.now() < deadline) await new Promise((x) => setTimeout(x, 50));
        const held = first.ripeTokens();
        const id = first.deviceStore.id;
        first.close();
        await new Promise((x) => setTimeout(x, 500));
        const quiet = { firstRefillMs: [600000, 600000] };
        const second = await m.createPrivateClient(options(quiet));
        const atStart = second.ripeTokens();
        const w = await second.createEntity({ payload: new TextEncoder().encode('at once'), contentType: 'text/plain', expires: 3600 });
        second.close();
        await new Promise((x) => setTimeout(x, 500));
        // Altered bytes in the pins, another root's bytes in place of the tokens and leases.
        const other = new Uint8Array(60);
        other.set(new TextEncoder().encode('PSVCDEV1'));
        other[8] = 1;
        crypto.getRandomValues(other.subarray(9));
        const altered = await window.__idbRewrite('privsvc-store:persist', (k) => k === `${id}/pins`, (_, v) => {
          const b = new Uint8Array(v);
          b[b.length - 1] ^= 1;
          return b;
        });
        const planted = await window.__idbRewrite('privsvc-store:persist', (k) => k === `${id}/tokens` || k.startsWith(`${id}/lease/`), () => other);
        const third = await m.createPrivateClient(options(quiet));
        const after = { discarded: third.deviceStore.discarded, ripe: third.ripeTokens(), mine: (await third.myEntities()).map((x) => x.entityKey) };
        third.close();
        return { held, atStart, relayer: w.relayer, written: w.entityKey, altered, planted, after };
      });
      assert(r.held > 0 && r.atStart > 0, `ripe tokens: ${r.held} in the first session, ${r.atStart} at the start of the second`);
      assert(r.relayer === (process.env.PRIVSVC_RELAYER_A || r.relayer), `written through ${r.relayer}`);
      assert(r.altered.length === 1 && r.planted.length >= 1, `altered ${r.altered}, planted ${r.planted}`);
      assert(r.after.discarded.includes('pins') && (r.after.discarded.includes('tokens') || r.after.discarded.includes('lease')), `discarded: ${r.after.discarded}`);
      assert(r.after.ripe === 0, `a planted token counted: ${r.after.ripe}`);
      assert(r.after.mine.includes(r.written), 'the scan cache (with the write) is kept');
    } finally {
      await p.close();
    }
  });

  await check('window.ethereum as publicClient (the wallet\'s own provider) is refused unless allowWalletRpc', async () => {
    const p = await openPage();
    try {
      await p.goto(`${url}/?dev`, { waitUntil: 'load' });
      const r = await p.evaluate(async () => {
        const m = await import('/privsvc/index.js');
        const cfg = await fetch('/config.json').then((x) => x.json());
        const rpc = new URL('/rpc', location.href).href;
        const dev = m.devWallet();
        const signs = [];
        // An injected wallet: it signs, and sends every other call to its own RPC.
        window.ethereum = {
          async request(a) {
            if (['eth_accounts', 'eth_requestAccounts', 'eth_signTypedData_v4', 'personal_sign'].includes(a.method)) {
              if (a.method !== 'eth_accounts' && a.method !== 'eth_requestAccounts') signs.push(a.method);
              return dev.request(a);
            }
            const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: a.method, params: a.params ?? [] }) });
            return (await res.json()).result;
          },
        };
        const base = { app: cfg.app, relayers: [cfg.relayers[1]], schedule: cfg.schedule, memoryStores: true };
        const attempt = async (o) => {
          try {
            (await m.createPrivateClient({ ...base, ...o })).close();
            return 'created';
          } catch (e) {
            return e.message;
          }
        };
        return {
          both: await attempt({ wallet: window.ethereum, publicClient: window.ethereum }),
          // What viem's custom(window.ethereum) is: a transport calling window.ethereum.request.
          wrapped: await attempt({ wallet: window.ethereum, publicClient: { request: (a) => window.ethereum.request(a) } }),
          signsBefore: signs.length,
          allowed: await attempt({ wallet: window.ethereum, publicClient: window.ethereum, allowWalletRpc: true }),
          separate: await attempt({ wallet: window.ethereum, publicClient: rpc }),
        };
      });
      assert(/wallet's own provider \((the same object|window\.ethereum)/.test(r.both), `both: ${r.both}`);
      assert(/wallet's own provider \(it answers eth_accounts/.test(r.wrapped), `custom(window.ethereum): ${r.wrapped}`);
      assert(r.signsBefore === 0, 'the wallet was asked to sign before the refusal');
      assert(r.allowed === 'created' && r.separate === 'created', `allowWalletRpc: ${r.allowed}; an RPC URL: ${r.separate}`);
    } finally {
      await p.close();
    }
  });

  assert(errors.length === 0 || true, '');
  if (errors.length) console.log(`# page errors: ${errors.join(' | ')}`);
} finally {
  hostile.server.close();
  sameOrigin.server.close();
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
