// The package in Node.js 22 (package.json "exports", condition `node`): node_setup.js loads the
// wasm module from its file and provides the worker thread, then everything index.js exports.
import './node_setup.js';

export * from './index.js';
