// Browser benchmark (docs/BENCHMARKS.md, wasm section): a new session of a user with no records
// on an app the stack was seeded with (`web_seed`), in headless Chromium: building the client
// (its first listing, with attributes for the rarity check), the first `myEntities` (open every
// tag in the worker vault, fetch cover batches) and a refresh. Prints the figures.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const url = process.env.PRIVSVC_WEB_URL;
if (!url) {
  console.error('PRIVSVC_WEB_URL is not set: run scripts/js-test.sh --bench');
  process.exit(2);
}
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
try {
  const page = await browser.newPage();
  await page.goto(`${url}/?dev`, { waitUntil: 'load' });
  const r = await page.evaluate(async () => {
    const m = await import('/privsvc/index.js');
    const cfg = await fetch('/config.json').then((x) => x.json());
    const t0 = performance.now();
    const c = await m.createPrivateClient({
      app: cfg.app,
      wallet: m.devWallet(),
      publicClient: new URL('/rpc', location.href).href,
      relayers: [cfg.relayers[1]],
      // `refresh` waits for the session's next tail: the stack's fast tail, so that the
      // measure is the scan, not the wait (a default tail is 15-45 s away).
      schedule: cfg.schedule,
    });
    const t1 = performance.now();
    const mine = await c.myEntities();
    const t2 = performance.now();
    await c.myEntities({ refresh: true });
    const t3 = performance.now();
    return { build: t1 - t0, first: t2 - t1, refresh: t3 - t2, mine: mine.length, vault: c.vault.constructor.name };
  });
  console.log(
    `# chromium, ${r.vault}: client build (first listing) ${r.build.toFixed(0)} ms, first myEntities ${r.first.toFixed(0)} ms, refresh ${r.refresh.toFixed(0)} ms (${r.mine} own records)`,
  );
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
