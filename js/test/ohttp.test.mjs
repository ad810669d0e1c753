// The OHTTP gateway side and ohttpCall against each other, through a relay and gateway served by
// Node on loopback; the token helpers relayers use.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';

import { OhttpGateway, PrivsvcError, issuanceMessage, ohttpCall, tokenId, tokenSuite, devWallet } from 'privsvc';

/** A relay and gateway in one: POST /ohttp opens with `gateway`, `answer(request)` replies. */
async function serve(gateway, answer) {
  const seen = [];
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    seen.push({ url: req.url, target: req.headers['x-privsvc-target'], type: req.headers['content-type'] });
    let opened;
    try {
      opened = gateway.open(new Uint8Array(Buffer.concat(chunks)));
    } catch (e) {
      assert.ok(e instanceof PrivsvcError);
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"cannot open"}');
      return;
    }
    const sealed = opened.seal(answer(opened.request));
    assert.throws(() => opened.seal({ status: 200 }), PrivsvcError, 'a response is sealed once');
    res.writeHead(200, { 'content-type': 'message/ohttp-res' }).end(Buffer.from(sealed));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, seen, close: () => server.close() };
}

test('ohttpCall reaches a JS gateway: the gateway sees the request, the relay only ciphertext', async () => {
  const gateway = OhttpGateway.fromSeed(randomBytes(32));
  assert.match(gateway.publicKey, /^010020[0-9a-f]{64}000400010001$/);
  const body = JSON.stringify({ hello: 'gateway' });
  const relay = await serve(gateway, (request) => {
    assert.equal(request.method, 'POST');
    assert.equal(request.path, '/v1/records');
    assert.equal(new TextDecoder().decode(request.body), body);
    assert.ok(request.headers.some(([n, v]) => n === 'content-type' && v === 'application/json'));
    return { status: 201, headers: [['content-type', 'application/json']], body: '{"id":"r1"}' };
  });
  try {
    const fetched = [];
    const answer = await ohttpCall(relay.url, 'https://relayer.example', gateway.publicKey, { method: 'POST', path: '/v1/records', body }, (url, init) => {
      fetched.push(url);
      return fetch(url, init);
    });
    assert.equal(answer.status, 201);
    assert.equal(new TextDecoder().decode(answer.body), '{"id":"r1"}');
    assert.deepEqual(fetched, [`${relay.url}/ohttp`]);
    assert.deepEqual(relay.seen, [{ url: '/ohttp', target: 'https://relayer.example', type: 'message/ohttp-req' }]);

    // A request encapsulated to another gateway's key does not open; the caller is told.
    const other = OhttpGateway.fromSeed(randomBytes(32));
    await assert.rejects(ohttpCall(relay.url, 'https://relayer.example', other.publicKey, { path: '/v1/info' }), PrivsvcError);
    assert.throws(() => gateway.open(new Uint8Array([1, 2, 3])), PrivsvcError);
    assert.throws(() => OhttpGateway.fromSeed(new Uint8Array(4)), PrivsvcError);
  } finally {
    relay.close();
  }
});

test('token helpers: the suite, token ids and the issuance message a wallet signs', async () => {
  assert.match(tokenSuite(), /RSABSSA-SHA384-PSS/);
  const prepared = randomBytes(70);
  assert.equal(tokenId(prepared), createHash('sha256').update(prepared).digest('hex'));
  const blinded = [randomBytes(256), randomBytes(256)];
  const wallet = await devWallet().request({ method: 'eth_accounts' });
  const req = {
    issuer: '0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A',
    chainId: 7738577,
    app: 'notes',
    epoch: 20781,
    wallet: wallet[0],
    blinded: blinded.map((b) => b.toString('base64')),
    ts: 1795521600000,
    walletSignature: `0x${'00'.repeat(65)}`,
  };
  const digest = createHash('sha256').update(Buffer.concat(blinded)).digest('hex');
  assert.equal(
    issuanceMessage(req, req.ts),
    `privsvc token issuance v2\nissuer: ${req.issuer}\nchain: 7738577\napp: notes\nepoch: 20781\nts: ${req.ts}\nblinded: ${digest}`,
  );
  assert.throws(() => issuanceMessage({ ...req, blinded: ['not base64!'] }, req.ts), PrivsvcError);
});
