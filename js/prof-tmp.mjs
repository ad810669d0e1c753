import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
const url = process.env.PRIVSVC_WEB_URL;
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, userDataDir: mkdtempSync(join(tmpdir(), 'p-')),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
const page = await browser.newPage();
await page.goto(`${url}/?dev`, { waitUntil: 'load' });
const cdp = await page.createCDPSession();
await cdp.send('Profiler.enable');
await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
await page.evaluate(async () => { window.m = await import('/privsvc/index.js'); window.cfg = await fetch('/config.json').then((x) => x.json()); });
await cdp.send('Profiler.start');
const ms = await page.evaluate(async () => {
  const t0 = performance.now();
  const c = await m.createPrivateClient({ app: cfg.app, wallet: m.devWallet(), publicClient: new URL('/rpc', location.href).href, relayers: [cfg.relayers[1]], schedule: cfg.schedule });
  return performance.now() - t0;
});
const { profile } = await cdp.send('Profiler.stop');
const self = new Map();
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const dt = profile.timeDeltas; let total = 0;
profile.samples.forEach((id, i) => { const n = byId.get(id); const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').pop()}`; self.set(k, (self.get(k) || 0) + dt[i]); total += dt[i]; });
console.log('build ms', ms.toFixed(0), 'profiled', (total / 1000).toFixed(0));
[...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30).forEach(([k, v]) => console.log((v / 1000).toFixed(0).padStart(7), k));
await browser.close();
