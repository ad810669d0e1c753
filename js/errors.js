// The package's error classes (docs/API.md §3.8) and the conversion of the errors thrown by
// the wasm module or sent back by the vault worker into them. Imported by every other module;
// imports nothing, so there is no cycle.

/**
 * Base class of privsvc errors: no relayer available, every relayer failed, a `strict`
 * refusal, invalid attribute names, an unknown record in `proveOwnership`, a bad option.
 */
export class PrivsvcError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'PrivsvcError';
    /** Stable code for programs (`err.code === 'PRIVSVC'`). */
    this.code = 'PRIVSVC';
  }
}

/** The wallet gave two different derivation signatures. */
export class NonDeterministicWalletError extends PrivsvcError {
  constructor(message, options) {
    super(message, options);
    this.name = 'NonDeterministicWalletError';
    /** Stable code for programs (`err.code === 'NON_DETERMINISTIC_WALLET'`). */
    this.code = 'NON_DETERMINISTIC_WALLET';
  }
}

/** The wallet is a contract account (its derivation signature does not recover to it). */
export class SmartContractWalletError extends PrivsvcError {
  constructor(message, options) {
    super(message, options);
    this.name = 'SmartContractWalletError';
    /** Stable code for programs (`err.code === 'SMART_CONTRACT_WALLET'`). */
    this.code = 'SMART_CONTRACT_WALLET';
  }
}

/** The issuer published two keys for one app and day. */
export class IssuerEquivocationError extends PrivsvcError {
  constructor(message, options) {
    super(message, options);
    this.name = 'IssuerEquivocationError';
    /** Stable code for programs (`err.code === 'ISSUER_EQUIVOCATION'`). */
    this.code = 'ISSUER_EQUIVOCATION';
  }
}

/**
 * A write found no token it may spend (one obtained before the write was requested and at
 * least `tokenMinAgeMs` old) and no relayer that requires none; thrown at once, the issuer is
 * not asked (unless `allowOnDemand`). `code` is `NO_TOKEN_READY`: retry once
 * `client.ripeTokens()` is above 0 (the session refills on its own schedule).
 */
export class NoTokenReady extends PrivsvcError {
  constructor(message, options) {
    super(message, options);
    this.name = 'NoTokenReady';
    /** Stable code for programs (`err.code === 'NO_TOKEN_READY'`). */
    this.code = 'NO_TOKEN_READY';
  }
}

const ERROR_CLASSES = {
  PrivsvcError,
  NonDeterministicWalletError,
  SmartContractWalletError,
  IssuerEquivocationError,
  NoTokenReady,
};

/**
 * The package's error class (docs/API.md §3.8) of an error thrown by the wasm module or sent
 * back by a worker (its `name` picks the class; anything else becomes a PrivsvcError).
 * @internal
 */
export function toSpecError(e) {
  if (e instanceof PrivsvcError) return e;
  const name = e && e.name;
  const cls = Object.hasOwn(ERROR_CLASSES, name) ? ERROR_CLASSES[name] : PrivsvcError;
  return new cls(e && e.message ? e.message : String(e));
}

/** Runs `fn`, rethrowing what it throws as a package error. @internal */
export function call(fn) {
  try {
    return fn();
  } catch (e) {
    throw toSpecError(e);
  }
}

/** Awaits `promise`, rethrowing its rejection as a package error. @internal */
export async function rust(promise) {
  try {
    return await promise;
  } catch (e) {
    throw toSpecError(e);
  }
}

/**
 * Refuses an ownership proof request without a `challenge` or a `verifier` (non-empty strings):
 * a proof over "undefined" would verify for anyone who also forgot them.
 * @internal
 */
export function checkProofParams(what, { challenge, verifier }) {
  for (const [name, value] of [['challenge', challenge], ['verifier', verifier]]) {
    if (typeof value !== 'string' || value.length === 0) {
      throw new PrivsvcError(
        `${what}: \`${name}\` is required, a non-empty string (${name === 'challenge' ? "the verifier's fresh random challenge" : "the verifier's name, e.g. its host"}); got ${value === undefined ? 'nothing' : typeof value}`,
      );
    }
  }
}
