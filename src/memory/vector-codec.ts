// A vector's wire form on the memory changelog: its float32 values, little-endian, in
// base64. Exact (the next holder ranks with the very vector this one made, where float16 or
// int8 would shift scores), ~5.3 bytes a dimension where a JSON number array takes ~20
// (1,536 dims: 8 KiB, not ~30), and one byte order on every node whatever its CPU.
// node.db keeps the same bytes (memory_vectors.vector), so a flush re-encodes no floats.

const BYTES_PER_FLOAT = 4;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The little-endian bytes of a vector (what node.db and the wire hold). */
export function vectorBytes(v: Float32Array): Uint8Array {
  const out = new Uint8Array(v.length * BYTES_PER_FLOAT);
  const view = new DataView(out.buffer);
  for (let i = 0; i < v.length; i++) view.setFloat32(i * BYTES_PER_FLOAT, v[i]!, true);
  return out;
}

/** Bytes read back as floats (little-endian), or null when they are not `dims` finite floats. */
export function floatsOf(bytes: Uint8Array, dims: number): Float32Array | null {
  if (bytes.byteLength !== dims * BYTES_PER_FLOAT) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(dims);
  for (let i = 0; i < dims; i++) {
    const f = view.getFloat32(i * BYTES_PER_FLOAT, true);
    if (!Number.isFinite(f)) return null;
    out[i] = f;
  }
  return out;
}

export const encodeVector = (v: Float32Array): string => bytesToBase64(vectorBytes(v));
export const bytesToBase64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");

/** The wire string's bytes, or null when it is not base64. */
export function base64ToBytes(s: string): Uint8Array | null {
  if (s.length % 4 !== 0 || !BASE64.test(s)) return null;
  return new Uint8Array(Buffer.from(s, "base64"));
}
