// Byte helpers shared by the package's modules (not part of the package's API).
import { PrivsvcError } from './errors.js';

/** The bytes of hex text (`0x` optional); throws PrivsvcError on anything else. */
export function hexToBytes(hex) {
  const s = hex.startsWith('0x') ? hex.slice(2) : hex;
  if (s.length % 2 !== 0 || /[^0-9a-fA-F]/.test(s)) throw new PrivsvcError('invalid hex');
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/**
 * The buffer of `bytes` as a postMessage transfer list, when `bytes` is all of an ArrayBuffer:
 * the buffer then moves to the other thread instead of being copied, and the sender's view is
 * left empty. A view into a larger (or shared) buffer is copied.
 */
export function movable(bytes) {
  return bytes instanceof Uint8Array && bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? [bytes.buffer]
    : [];
}

/**
 * A custom vault's openTags answer (a reference or undefined for each of `count` tags) in the
 * built-in vaults' packed form: for each opened tag, its index (u32, little-endian) and its
 * 16-byte reference. Throws PrivsvcError on an answer that is not one.
 */
export function packOpened(answer, count) {
  if (!Array.isArray(answer) || answer.length > count) {
    throw new PrivsvcError(`the vault's openTags answered ${Array.isArray(answer) ? `${answer.length} entries for ${count} tags` : 'no array'}`);
  }
  const opened = [];
  answer.forEach((r, i) => {
    if (r === undefined || r === null) return;
    if (typeof r !== 'string' || !/^(0x)?[0-9a-fA-F]{32}$/.test(r)) {
      throw new PrivsvcError(`the vault's openTags answered an invalid record reference for tag ${i}: 32 hex digits expected`);
    }
    opened.push(i);
  });
  const out = new Uint8Array(20 * opened.length);
  const view = new DataView(out.buffer);
  opened.forEach((i, k) => {
    view.setUint32(20 * k, i, true);
    out.set(hexToBytes(answer[i]), 20 * k + 4);
  });
  return out;
}
