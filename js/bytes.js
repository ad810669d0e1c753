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
