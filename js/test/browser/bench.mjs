// Browser benchmark (docs/BENCHMARKS.md, wasm section), on the app the stack was seeded with
// (`scripts/js-test.sh --bench`, which runs `web_seed`): in headless Chromium, a user with no
// records of their own
//   - first session: building the client (its first listing, with attributes for the rarity
//     check, and its first scan: open every tag in the worker vault, fetch cover batches; the
//     scan saves the sealed scan cache in IndexedDB) and the first `myEntities` (which makes no
//     request: docs/PROTOCOL.md §8.4);
//   - a refresh;
//   - a returning session in a new page of the same browser profile: building the client (the
//     cache loaded from IndexedDB and opened, only what is new since its resume block listed)
//     and its first `myEntities`;
// and the memory of the renderer processes (RSS) after the first session; then, in the first
// session's page, the floor (bench/floor.mjs): the first listing's requests, recorded as the
// client sent them, fetched again with today's full rows by `fetch` and `JSON.parse` alone.
// Prints one line: the figures and the ratio of the first session to the floor. With
// PRIVSVC_BENCH_CPU=1 (Linux), two more: the CPU time the browser's threads and the local stack
// used during the first session and during the floor, by component (bench/cpu.mjs).
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { availableParallelism } from 'node:os';
import { cpuLine, descendsFrom, startCpuSampler } from '../../bench/cpu.mjs';
import { listingFloor, recordListing } from '../../bench/floor.mjs';

const url = process.env.PRIVSVC_WEB_URL;
if (!url) {
  console.error('PRIVSVC_WEB_URL is not set: run scripts/js-test.sh --bench');
  process.exit(2);
}
const records = process.env.PRIVSVC_BENCH_RECORDS || '?';
const cfg = await fetch(`${url}/config.json`).then((x) => x.json());

/**
 * Memory of this browser's renderer processes, MiB: the processes under the browser's own (not
 * those of another Chromium on the machine) whose command line says `--type=renderer`. `rss`
 * sums their resident sets, which counts the pages they share (Chromium's code, fonts, the V8
 * snapshot) once per process; `pss` sums their proportional sets (a shared page split among
 * its sharers, /proc/PID/smaps_rollup): the memory the renderers take from the machine.
 */
function rendererMemory() {
  const root = browser.process().pid;
  const under = (pid) => descendsFrom(pid, root);
  let rss = 0;
  let pss = 0;
  let processes = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      if (!under(Number(pid))) continue;
      const r = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m);
      const p = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+)/m);
      rss += r ? Number(r[1]) : 0;
      pss += p ? Number(p[1]) : 0;
      processes += 1;
    } catch {
      // The process ended.
    }
  }
  return { rss: Math.round(rss / 1024), pss: Math.round(pss / 1024), processes };
}

/** A headless Chromium with a fresh profile (no IndexedDB: a first session is a first session). */
async function launch(profile) {
  return puppeteer.launch({
    executablePath: process.env.PRIVSVC_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    userDataDir: profile,
    protocolTimeout: 600000,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}
/** The browser of the run under way. */
let browser;

/**
 * With PRIVSVC_BENCH_PROFILE=DIR: CPU profiles (DevTools' `.cpuprofile`) of each session's page
 * and of every worker it starts (the vault's), written to DIR when the session ends; read
 * them with `node bench/profile-top.mjs DIR/*.cpuprofile` or in DevTools.
 */
async function startProfiles(page, label) {
  const sessions = [['page', await page.createCDPSession()]];
  const start = async (client) => {
    await client.send('Profiler.enable');
    await client.send('Profiler.setSamplingInterval', { interval: 200 });
    await client.send('Profiler.start');
  };
  page.on('workercreated', (w) => {
    sessions.push([`worker${sessions.length}`, w.client]);
    start(w.client).catch(() => {});
  });
  await start(sessions[0][1]);
  return {
    async stop(dir) {
      const { writeFileSync, mkdirSync } = await import('node:fs');
      mkdirSync(dir, { recursive: true });
      for (const [name, client] of sessions) {
        try {
          const { profile } = await client.send('Profiler.stop');
          writeFileSync(join(dir, `${records}-${label}-${name}.cpuprofile`), JSON.stringify(profile));
        } catch (e) {
          console.error(`# no profile of ${name}: ${e.message}`);
        }
      }
    },
  };
}

/**
 * With PRIVSVC_BENCH_TRACE=1 (and PRIVSVC_BENCH_TRACE_ALL=1 for each of the first listing's
 * batched requests too), every fetch of each session, printed with its start and
 * the arrival of its answer's headers (ms after the client build started) and what it asked:
 * the gaps between fetches are the session's own work (the worker's start, the device store,
 * decoding). Self-contained: its text is handed to the page.
 */
function traceFetches() {
  const plain = globalThis.fetch;
  const log = [];
  globalThis.__fetchTrace = log;
  globalThis.fetch = async (url, init) => {
    const start = performance.now();
    let what = String(url).replace(location.origin, '');
    const body = init && init.body;
    if (typeof body === 'string') {
      try {
        const calls = [].concat(JSON.parse(body));
        what += ` ${calls.length > 1 ? `${calls.length} x ` : ''}${calls[0].method}`;
      } catch {
        what += ' (a body)';
      }
    } else if (body) what += ` (${body.byteLength ?? '?'} bytes)`;
    const res = await plain(url, init);
    log.push({ start, headers: performance.now(), what, length: res.headers.get('content-length') });
    return res;
  };
}

/**
 * One session in a new page: build, first myEntities, optionally a refresh. The first session
 * (`refresh`) records its first listing's requests and measures the floor after it.
 */
async function session(refresh) {
  const page = await browser.newPage();
  const profiler = process.env.PRIVSVC_BENCH_PROFILE ? await startProfiles(page, refresh ? 'first' : 'returning') : undefined;
  await page.goto(`${url}/?dev`, { waitUntil: 'load' });
  if (refresh) await page.evaluate(recordListing, cfg.project ?? cfg.app);
  const trace = process.env.PRIVSVC_BENCH_TRACE === '1';
  if (trace) await page.evaluate(traceFetches);
  const r = await page.evaluate(async (refresh) => {
    const m = await import('/privsvc/index.js');
    const cfg = await fetch('/config.json').then((x) => x.json());
    const t0 = performance.now();
    const c = await m.createPrivateClient({
      app: cfg.app,
      // The same user in both sessions: the scan cache opens only under its vault's key.
      wallet: m.devWallet(`0x${'7'.repeat(64)}`),
      publicClient: new URL('/rpc', location.href).href,
      relayers: [cfg.relayers[1]],
      // `refresh` waits for the session's next scan: the stack's fast timers, so that the
      // measure is the scan, not the wait (a default scan is 1-3 min away).
      schedule: cfg.schedule,
    });
    const t1 = performance.now();
    if (globalThis.__privsvcListing) globalThis.__listing = globalThis.__privsvcListing.stop();
    const mine = await c.myEntities();
    const t2 = performance.now();
    if (refresh) await c.myEntities({ refresh: true });
    const t3 = performance.now();
    const out = { build: t1 - t0, first: t2 - t1, refresh: t3 - t2, mine: mine.length, vault: c.vault.isolated ? 'WorkerVault' : 'KeyVault', cache: c.scanCache };
    // Where the renderer's memory is: the page's wasm memory (it grows and never shrinks) and
    // its JS heap (Chromium's performance.memory).
    const pkg = await import('/privsvc/pkg/privsvc_wasm.js');
    out.wasmMiB = Math.round((await pkg.default()).memory.buffer.byteLength / 2 ** 20);
    out.heapMiB = performance.memory ? Math.round(performance.memory.usedJSHeapSize / 2 ** 20) : undefined;
    // The first session's span in epoch ms, for the CPU figures.
    out.span = [performance.timeOrigin + t0, performance.timeOrigin + t2];
    if (globalThis.__fetchTrace) out.trace = globalThis.__fetchTrace.map((f) => ({ ...f, start: f.start - t0, headers: f.headers - t0 }));
    c.close();
    return out;
  }, refresh);
  Object.assign(r, rendererMemory());
  if (profiler) await profiler.stop(process.env.PRIVSVC_BENCH_PROFILE);
  if (refresh) {
    // The floor in the same page, after the session's client closed.
    r.listing = await page.evaluate(() => ({ requests: globalThis.__listing.bodies.length, bytes: globalThis.__listing.bytes, answers: globalThis.__listing.answers }));
    r.floor = await page.evaluate(`(async () => {
      const from = performance.timeOrigin + performance.now();
      const floor = await (${listingFloor})(new URL('/rpc', location.href).href, globalThis.__listing.bodies);
      return { ...floor, span: [from, performance.timeOrigin + performance.now()] };
    })()`);
  }
  await page.close();
  return r;
}

/**
 * PRIVSVC_BENCH_RUNS (default 1): the first session, its floor and the returning session are
 * measured that many times, each run in a new browser with a fresh profile; the last line gives
 * the median ratio (one run's ratio moves by a third with the load on shared cores).
 */
const runs = Math.max(1, Number(process.env.PRIVSVC_BENCH_RUNS || 1));
const ratios = [];
for (let run = 1; run <= runs; run += 1) {
  const profile = mkdtempSync(join(tmpdir(), 'privsvc-chromium-'));
  browser = await launch(profile);
  const of = runs > 1 ? ` (run ${run} of ${runs})` : '';
  const cpu = process.env.PRIVSVC_BENCH_CPU === '1' ? startCpuSampler(browser.process().pid) : undefined;
  try {
    const first = await session(true);
    const back = await session(false);
    if (cpu) {
      cpu.stop();
      const line = ([from, to]) => cpuLine(cpu.between(from, to), from, to, availableParallelism());
      console.log(`# chromium, ${records} records${of}: CPU of the first session: ${line(first.span)}`);
      console.log(`# chromium, ${records} records${of}: CPU of its floor: ${line(first.floor.span)}`);
    }
    const ms = (x) => x.toFixed(0);
    const f = first.floor;
    const firstMs = first.build + first.first;
    ratios.push(firstMs / f.ms);
    const clientBytes = first.listing.answers === first.listing.requests ? (first.listing.bytes / f.rows).toFixed(0) : '?';
    console.log(
      `# chromium, ${records} records${of}: first session ${ms(firstMs)} ms / floor ${ms(f.ms)} ms = ${(firstMs / f.ms).toFixed(2)} x the floor (the floor: the first listing's ${f.requests} requests, ${f.pages} pages, ${f.rows} rows of ${(f.bytes / f.rows).toFixed(0)} bytes with every attribute, ${(f.bytes / 2 ** 20).toFixed(1)} MiB, fetch + JSON.parse only; the client's listing answers: ${clientBytes} bytes a row)`,
    );
    console.log(
      `# chromium, ${first.vault}, ${records} records${of}: first session ${ms(first.build + first.first)} ms (client build, its first listing and first scan, ${ms(first.build)} ms + first myEntities ${ms(first.first)} ms), refresh ${ms(first.refresh)} ms, renderer RSS ${first.rss} MiB summed over ${first.processes} renderer processes, PSS ${first.pss} MiB (the page's wasm memory ${first.wasmMiB} MiB, its JS heap ${first.heapMiB} MiB) | returning session ${ms(back.build + back.first)} ms (build with the cache ${ms(back.build)} ms + myEntities ${ms(back.first)} ms; cache ${back.cache.state}${back.cache.block !== undefined ? ` at block ${back.cache.block}` : ''})`,
    );
    // The first session's fetches, its listing's batched requests summed up: every other fetch,
    // and the span of the batches (with the time none of them was in flight).
    const pages = (first.trace ?? []).filter((t) => / x arkiv_query$/.test(t.what));
    for (const t of (first.trace ?? []).filter((t) => process.env.PRIVSVC_BENCH_TRACE_ALL || !pages.includes(t))) {
      console.log(`#   first session fetch: ${t.start.toFixed(0).padStart(5)} -> ${t.headers.toFixed(0).padStart(5)} ms  ${t.what}${t.length ? ` (${t.length} bytes)` : ''}`);
    }
    if (pages.length > 0) {
      const spans = pages.map((t) => [t.start, t.headers]).sort((a, b) => a[0] - b[0]);
      let idle = 0;
      let reach = spans[0][1];
      for (const [start, end] of spans.slice(1)) {
        if (start > reach) idle += start - reach;
        reach = Math.max(reach, end);
      }
      console.log(`#   first session listing: ${pages.length} batched requests from ${spans[0][0].toFixed(0)} to ${reach.toFixed(0)} ms; none in flight for ${idle.toFixed(0)} ms of it`);
    }
    for (const t of back.trace ?? []) {
      console.log(`#   returning session fetch: ${t.start.toFixed(0).padStart(5)} -> ${t.headers.toFixed(0).padStart(5)} ms  ${t.what}${t.length ? ` (${t.length} bytes)` : ''}`);
    }
    if (back.cache.state !== 'resumed') process.exitCode = 1;
  } finally {
    if (cpu) cpu.stop();
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
if (runs > 1) {
  const sorted = [...ratios].sort((a, b) => a - b);
  console.log(`# chromium, ${records} records: first session / floor over ${runs} runs: median ${sorted[Math.floor(runs / 2)].toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')})`);
}
