// privsvc for browsers and Node.js 22: the client API of docs/API.md §3 over the privsvc-wasm
// bindings.
//
// The cryptography (key derivation, tags, envelopes, proofs, fingerprint checks) is the Rust code
// of the privsvc crates compiled to WebAssembly. This module only gathers the package's exports:
// errors.js (error classes), core.js (constants, envelopes, attributes, fingerprinting, wallets,
// vaults, proofs, relayer-side helpers), net.js (the fetch settings and ledger readers),
// store.js (the device store: tokens, pins and the scan cache, sealed), scan_cache.js (scan-cache
// stores) and client.js (the client, reading, verification, tokens). Modules import each other
// in that order only: no import cycle.
export {
  PrivsvcError,
  NonDeterministicWalletError,
  SmartContractWalletError,
  IssuerEquivocationError,
  NoTokenReady,
} from './errors.js';
export * from './core.js';
export { FETCH_INIT, DEFAULT_RPC_URL, ledgerReader } from './net.js';
export { memoryStore, browserTokenStore, fileTokenStore } from './store.js';
export { browserScanCache, fileScanCache } from './scan_cache.js';
export * from './client.js';
