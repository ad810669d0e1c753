
// ---- The test's epilogue (js/test/apps/harness.js), appended to js/README.md's example: it
// hands what the example made to the Chromium test, which asserts on it.
import { WorkerVault as TestWorkerVault } from 'privsvc';

window.__privsvcApp = {
  workerVault: client.vault instanceof TestWorkerVault,
  isolated: client.vault.isolated,
  written: r.entityKey,
  listed: mine.filter((e) => e.entityKey === r.entityKey).map((e) => e.toText()),
  proofOwner: proof.owner,
  writtenOwner: r.owner,
  verdict,
};
