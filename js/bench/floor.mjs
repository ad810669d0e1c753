// The floor under a first listing (docs/BENCHMARKS.md), for the scan benchmarks in Chromium
// (test/browser/bench.mjs) and Node.js (bench/scan.mjs): the same JSON-RPC listing requests the
// client's first listing sent, fetched again with `fetch` and `JSON.parse` only, no client.
//
// Both functions are self-contained: the Chromium bench hands their text to the page
// (puppeteer's `page.evaluate`), so they use nothing from this module's scope.

/**
 * Wraps `globalThis.fetch` (which the package's ledger reader looks up at each call) and records
 * the bodies of the project's listing requests: JSON-RPC calls or batches of `arkiv_query`
 * pages whose expression starts with `project = str('<project>')`, in the order sent, and the
 * bytes of their answers (`content-length`). `globalThis.__privsvcListing.stop()` puts the
 * platform fetch back and returns `{ bodies, bytes, answers }` (`answers`: how many of them
 * declared their length).
 */
export function recordListing(project) {
  const prefix = `project = str('${project.replace(/'/g, "''")}')`;
  const plain = globalThis.fetch;
  const rec = { bodies: [], bytes: 0, answers: 0 };
  globalThis.fetch = async (url, init) => {
    const body = init && typeof init.body === 'string' ? init.body : undefined;
    let listing = false;
    if (body !== undefined && body.includes('"arkiv_query"')) {
      const calls = [].concat(JSON.parse(body));
      listing = calls.every((c) => c.method === 'arkiv_query' && String(c.params[0]).startsWith(prefix));
      if (listing) rec.bodies.push(body);
    }
    const res = await plain(url, init);
    const length = Number(res.headers.get('content-length'));
    if (listing && length > 0) {
      rec.bytes += length;
      rec.answers += 1;
    }
    return res;
  };
  globalThis.__privsvcListing = {
    stop() {
      globalThis.fetch = plain;
      return rec;
    },
  };
}

/**
 * The floor: the recorded listing request `bodies` sent again to `url` with `fetch`, four at a
 * time in the recorded order (the client has four requests in flight), each answer read with
 * `text()` and parsed with `JSON.parse`, nothing else. Every page asks for today's full rows
 * (key, owner, creator, creation and expiry blocks, every attribute: the first listing's
 * projection for the rarity check) whatever the recorded one was, and follows the floor's own
 * cursors (a cursor is bound to the projection): a range's next page waits for the answer to
 * its previous page, as in the client. Resolves to `{ ms, requests, pages, rows, bytes }`.
 */
export async function listingFloor(url, bodies) {
  const FULL_ROWS = {
    key: true, owner: true, creator: true, createdAt: true, updatedAt: false, expiresAt: true,
    creationFlags: false, contentType: false, payload: false, attributeSchema: false, attributes: true,
  };
  if (bodies.length === 0) throw new Error('no listing request was recorded');
  // Each page's cursor goes to the next page of the same expression (its range), if any.
  const last = new Map();
  const plan = bodies.map((text) => {
    const parsed = JSON.parse(text);
    const calls = (Array.isArray(parsed) ? parsed : [parsed]).map((call) => {
      const page = {};
      page.cursor = new Promise((resolve) => {
        page.resolve = resolve;
      });
      const expression = call.params[0];
      let wait;
      if (call.params[1].cursor !== undefined) {
        const previous = last.get(expression);
        if (!previous) throw new Error('a recorded page with a cursor and no first page');
        wait = previous.cursor;
      }
      last.set(expression, page);
      return { call, wait, page };
    });
    return { batch: Array.isArray(parsed), calls };
  });
  let next = 0;
  let pages = 0;
  let rows = 0;
  let bytes = 0;
  const lane = async () => {
    while (next < plan.length) {
      const request = plan[next++];
      const calls = [];
      for (const { call, wait } of request.calls) {
        const options = { ...call.params[1], select: FULL_ROWS };
        if (wait) {
          const cursor = await wait;
          if (cursor === undefined) throw new Error("the floor's range ended before the client's");
          options.cursor = cursor;
        }
        calls.push({ ...call, params: [call.params[0], options] });
      }
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(request.batch ? calls : calls[0]),
      });
      const text = await res.text();
      bytes += text.length;
      const answer = JSON.parse(text);
      const byId = new Map((Array.isArray(answer) ? answer : [answer]).map((a) => [a.id, a]));
      for (const { call, page } of request.calls) {
        const result = byId.get(call.id)?.result;
        if (!result) throw new Error(`the floor's page ${call.id} has no result`);
        pages += 1;
        rows += result.data ? result.data.length : 0;
        page.resolve(result.cursor ?? undefined);
      }
    }
  };
  const t0 = performance.now();
  await Promise.all([lane(), lane(), lane(), lane()]);
  return { ms: performance.now() - t0, requests: plan.length, pages, rows, bytes };
}
