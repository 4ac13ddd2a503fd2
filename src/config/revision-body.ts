// How a company is stored as one revision body in crewlet_config: JSON when it fits one
// broker message, gzipped JSON when only that fits. Pure: bytes in, bytes out. The size
// rule lives here so `crewlet validate`, `crewlet run` and the API refuse the same company.
import { gunzipSync, gzipSync } from "node:zlib";

/**
 * Largest stored revision (the company with its defaults filled in, its digest and who
 * stored it): one crewlet_config value, one broker message, and the broker's max_payload
 * (1 MiB, the nats-server default the sidecar keeps) counts headers and data together —
 * 1 KiB is the room for the KV create's headers.
 */
export const MAX_REVISION_BYTES = 1024 * 1024 - 1024;
/**
 * Most a gzipped body may inflate to when read. A generated seat is ~150 bytes as stored
 * (10,000 seats: 1.49 MB of JSON, 52 KB gzipped), so 64 MiB is ~400,000 seats: room for any
 * company one fleet runs, and a bound on what a corrupt value makes a reader allocate.
 */
export const MAX_INFLATED_REVISION_BYTES = 64 * 1024 * 1024;

/** gzip's first two bytes; a JSON body starts with '{'. */
const GZIP_MAGIC = [0x1f, 0x8b] as const;

const enc = new TextEncoder();
const dec = new TextDecoder();

export class RevisionTooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly json_bytes: number,
  ) {
    super(`the company is ${json_bytes} bytes as stored (with its defaults), ${bytes} gzipped, over the ${MAX_REVISION_BYTES}-byte limit of one revision`);
    this.name = "RevisionTooLarge";
  }
}

/** The JSON a stored revision holds: the company with its defaults, its digest, who stored it. */
export function revisionJson(digest: string, company: unknown, storedBy: string): string {
  return JSON.stringify({ digest, company, stored_by: storedBy });
}

/**
 * What refuses a node's company that no revision can hold, for the check list validate and
 * run share. The digest's length is fixed, so a placeholder weighs what the real one will.
 */
export function revisionSizeProblem(company: unknown, nodeId: string): { path: string; message: string } | null {
  try {
    encodeRevisionBody(revisionJson("0".repeat(64), company, nodeId));
    return null;
  } catch (err) {
    if (err instanceof RevisionTooLarge) return { path: "company", message: err.message };
    throw err;
  }
}

/**
 * The body as stored. Plain JSON whenever it fits, so every build reads it (a build before
 * this one knows no other form); gzipped only past the limit, where a company could not be
 * stored at all before — such a company needs every node on a build that reads it.
 * Throws RevisionTooLarge when even gzipped it does not fit.
 */
export function encodeRevisionBody(json: string): Uint8Array {
  const plain = enc.encode(json);
  if (plain.byteLength <= MAX_REVISION_BYTES) return plain;
  const packed = gzipSync(plain);
  if (packed.byteLength > MAX_REVISION_BYTES) throw new RevisionTooLarge(packed.byteLength, plain.byteLength);
  return new Uint8Array(packed.buffer, packed.byteOffset, packed.byteLength);
}

/** The JSON text of a stored body, either form. Throws on a body that inflates past the bound. */
export function decodeRevisionBody(value: Uint8Array): string {
  if (value[0] !== GZIP_MAGIC[0] || value[1] !== GZIP_MAGIC[1]) return dec.decode(value);
  return dec.decode(gunzipSync(value, { maxOutputLength: MAX_INFLATED_REVISION_BYTES }));
}
