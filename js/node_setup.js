// The Node.js side of the package, loaded first by node.js (the `node` entry of package.json
// "exports"): the wasm module from its file, and the vault worker as a `worker_threads` worker.
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

import { initSync } from './pkg/privsvc_wasm.js';
import { platform } from './platform.js';

initSync({ module: readFileSync(new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url)) });
platform.isNode = true;
platform.startWorker = () => new Worker(new URL('./worker_node.js', import.meta.url));
