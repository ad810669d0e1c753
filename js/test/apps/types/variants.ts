// The type test beside js/README.md's TypeScript example (build.mjs copies that one to
// build/types/readme.ts): the other shapes of viem's clients an app hands privsvc, wagmi's
// included, and values the declarations must refuse. Compiled with `tsc --strict`,
// skipLibCheck off, against viem's own types; never run.
import {
  createPublicClient,
  createWalletClient,
  custom,
  http,
  type Account,
  type Chain,
  type EIP1193Provider,
  type PublicClient,
  type Transport,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  browserTokenStore,
  createPrivateClient,
  devWallet,
  KeyVault,
  vaultFromWallet,
  verifyOwnershipProof,
  WorkerVault,
  type PrivateClientOptions,
  type Vault,
} from 'privsvc';

declare const provider: EIP1193Provider;
const rpc = 'http://127.0.0.1:8545';

// viem's clients as apps make them: over an injected provider, with a local account and a chain.
const injected = createWalletClient({ transport: custom(provider) });
const local = createWalletClient({
  account: privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d'),
  chain: { id: 60138453033, name: 'devnet', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpc] } } },
  transport: http(rpc),
});
const reader = createPublicClient({ transport: http(rpc) });
const overProvider = createPublicClient({ transport: custom(provider) });

// wagmi's: `useWalletClient()` and `usePublicClient()` hand out viem's types with these generics.
declare const wagmiWallet: WalletClient<Transport, Chain, Account>;
declare const wagmiPublic: PublicClient<Transport, Chain>;
// The default generics, as a helper typed `WalletClient` / `PublicClient` passes them on.
declare const plainWallet: WalletClient;
declare const plainPublic: PublicClient;

const options: PrivateClientOptions[] = [
  { app: 'notes', wallet: injected, publicClient: reader },
  { app: 'notes', wallet: local, publicClient: overProvider },
  { app: 'notes', wallet: wagmiWallet, publicClient: wagmiPublic },
  { app: 'notes', wallet: plainWallet, publicClient: plainPublic },
  { app: 'notes', wallet: provider, publicClient: provider },
  { app: 'notes', wallet: devWallet(), publicClient: rpc, isolateKeys: false },
];
for (const o of options) {
  const client = await createPrivateClient(o);
  const proof = await client.proveOwnership('0x01', { challenge: 'c', verifier: 'v' });
  const verdict = await verifyOwnershipProof(proof, { challenge: 'c', verifier: 'v', client: wagmiPublic });
  if (verdict.ok) client.close();
}

// Both vaults are Vaults; `isolated` tells them apart without constructor.name.
const vaults: Vault[] = [await WorkerVault.spawn({ timeoutMs: 5000 }), KeyVault.random('notes').vault];
const isolated: true = (await WorkerVault.random('notes')).vault.isolated;
const inPage: false = KeyVault.random('notes').vault.isolated;
const either = await vaultFromWallet(injected, 'notes', { isolateKeys: true, workerTimeoutMs: 5000 });
await createPrivateClient({ app: 'notes', vault: either, publicClient: reader });
console.log(vaults, isolated, inPage);

// Revision 4: stores, a token source told when the write was requested, records' `verified`.
const rev4 = await createPrivateClient({
  app: 'notes',
  wallet: local,
  publicClient: reader,
  memoryStores: true,
  allowWalletRpc: false,
  tokenMaxRipeMs: 3600000,
  schedule: { scanMs: [60000, 180000], fetchAgeBlocks: [32, 900], statusHorizonRounds: [1, 3] },
  tokens: { take: async (_app: string, _requestedMs?: number) => null, putBack: async () => {} },
});
const written: number = (await rev4.createEntity({ payload: new Uint8Array(), contentType: 'text/plain', expires: 3600 })).block;
const unverified: boolean = (await rev4.myEntities())[0].verified;
const sealed = browserTokenStore('notes');
const storeId: string | undefined = sealed.id;
console.log(written, unverified, storeId, rev4.deviceStore.discarded);

// What the declarations must refuse.
// @ts-expect-error memoryStores is a boolean
await createPrivateClient({ app: 'notes', wallet: local, memoryStores: 'yes' });
// @ts-expect-error a number is no wallet
await createPrivateClient({ app: 'notes', wallet: 42 });
// @ts-expect-error `app` is required
await createPrivateClient({ wallet: injected });
// @ts-expect-error an object without request or signTypedData is no wallet
await createPrivateClient({ app: 'notes', wallet: { signMessage: async () => '0x' } });
// @ts-expect-error a WorkerVault is isolated
const wrong: false = (await WorkerVault.spawn()).isolated;
console.log(wrong);
