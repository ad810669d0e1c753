import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
const url = process.env.PRIVSVC_WEB_URL;
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, userDataDir: mkdtempSync(join(tmpdir(), 'p-')),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
const page = await browser.newPage();
await page.goto(`${url}/?dev`, { waitUntil: 'load' });
const r = await page.evaluate(async () => {
  const m = await import('/privsvc/index.js'); const cfg = await fetch('/config.json').then((x) => x.json());
  const log = []; const orig = globalThis.fetch; const T0 = performance.now();
  globalThis.fetch = async (u, init) => { const t = performance.now(); const body = init && typeof init.body === 'string' ? init.body : ''; const meth = (body.match(/"method":"([^"]+)"/) || [])[1] || String(u); const res = await orig(u, init); const buf = await res.arrayBuffer(); log.push([meth, t - T0, performance.now() - T0, buf.byteLength]); return new Response(buf, { status: res.status, headers: res.headers }); };
  const t0 = performance.now();
  const c = await m.createPrivateClient({ app: cfg.app, wallet: m.devWallet(), publicClient: new URL('/rpc', location.href).href, relayers: [cfg.relayers[1]], schedule: cfg.schedule });
  const t1 = performance.now();
  return { build: t1 - t0, log };
});
console.log('build', r.build.toFixed(0));
const by = {};
for (const [m, s, e, b] of r.log) { const x = by[m] || (by[m] = { n: 0, first: s, last: e, busy: 0, bytes: 0 }); x.n++; x.last = Math.max(x.last, e); x.first = Math.min(x.first, s); x.busy += e - s; x.bytes += b; }
for (const [m, x] of Object.entries(by)) console.log(m.slice(0, 60), x.n, 'first', x.first.toFixed(0), 'last', x.last.toFixed(0), 'sum', x.busy.toFixed(0), 'bytes', x.bytes);
await browser.close();
