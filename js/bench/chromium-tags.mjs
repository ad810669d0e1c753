// Tag opens per second in headless Chromium, the same measurement as bench/tags.mjs in Node.js:
// serves js/ on 127.0.0.1, opens a blank page of that origin with puppeteer-core and runs, in
// the page, KeyVault.openTags on 10,000 foreign tags (ledger form, then one Uint8Array), best of
// 5 after 3 untimed runs. Needs no local stack:
//   node bench/chromium-tags.mjs [count]     (CHROMIUM: the browser, default /usr/bin/chromium)
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import puppeteer from 'puppeteer-core';

const n = Number(process.argv[2] || 10000);
const root = new URL('..', import.meta.url).pathname;
const types = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
  if (path === '/') {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>tag bench</title>');
    return;
  }
  try {
    if (path.includes('..') || path.startsWith('/node_modules/') || path.startsWith('/.tools/')) throw new Error('outside');
    const body = readFileSync(join(root, path));
    res.writeHead(200, { 'content-type': types[extname(path)] || 'application/octet-stream' }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const profile = mkdtempSync(join(tmpdir(), 'privsvc-chromium-bench-'));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  userDataDir: profile,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  const page = await browser.newPage();
  await page.goto(`${origin}/`, { waitUntil: 'load' });
  const r = await page.evaluate(async (n) => {
    const m = await import('/index.js');
    const { vault: other } = m.KeyVault.random('bench');
    const ref = other.newRecord();
    const tags = Array.from({ length: n }, () => other.makeTag(ref));
    const raw = new Uint8Array(44 * n);
    tags.forEach((t, i) => raw.set(Uint8Array.from(atob(t), (c) => c.charCodeAt(0)), 44 * i));
    const { vault } = m.KeyVault.random('bench');
    const best = (input) => {
      for (let i = 0; i < 3; i++) vault.openTags(input);
      let ms = Infinity;
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        const opened = vault.openTags(input);
        ms = Math.min(ms, performance.now() - t0);
        if (opened.length !== n || opened.some((x) => x !== undefined)) throw new Error('a foreign tag opened');
      }
      return Math.round(n / (ms / 1000));
    };
    return { texts: best(tags), bytes: best(raw), version: navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] };
  }, n);
  console.log(`chromium ${r.version}: KeyVault ${r.texts} tag opens/s (${n} ledger-form tags, best of 5)`);
  console.log(`chromium ${r.version}: KeyVault ${r.bytes} tag opens/s (one Uint8Array of raw tags)`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
  server.close();
}
