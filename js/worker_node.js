// The vault worker of `WorkerVault` in Node.js: a `worker_threads` worker, started by the Node.js
// entry (node_setup.js). Loads the wasm module from its file, then answers the main thread.
import { readFileSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

import { initSync } from './pkg/privsvc_wasm.js';
import { handle } from './worker_ops.js';

initSync({ module: readFileSync(new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url)) });
parentPort.on('message', (m) => handle(m, (r, moving = []) => parentPort.postMessage(r, moving)));
