// Tables for a carried vector: which one a node keeps (mergeVector, the spec's "takes the
// carried vector over a stored one of no model, another model or another width — never the
// reverse"), the wire encoding (exact, little-endian), and the record's decoding, each
// refusal naming its field.
import { describe, expect, test } from "bun:test";
import { decodeRecord, MAX_VECTOR_DIMS, type VectorRow } from "../../src/memory/records.ts";
import { base64ToBytes, encodeVector, floatsOf, vectorBytes } from "../../src/memory/vector-codec.ts";
import { mergeVector, type VectorStamp } from "../../src/memory/vector-merge.ts";

const at = (model: string, dims: number, embedded_at: number): VectorStamp => ({ model, dims, embedded_at });

describe("mergeVector: the carried vector or the local one", () => {
  test.each([
    ["no vector here (no model)", null, at("m1", 3, 100), "take_carried"],
    ["another model, carried newer (the holder refilled under the company's model)", at("m0", 3, 100), at("m1", 3, 200), "take_carried"],
    ["another model, carried at the same moment", at("m0", 3, 100), at("m1", 3, 100), "take_carried"],
    ["another width, carried newer (the endpoint's dimensions changed)", at("m1", 3, 100), at("m1", 4, 200), "take_carried"],
    ["another width, carried at the same moment", at("m1", 3, 100), at("m1", 4, 100), "take_carried"],
    ["same model and width, carried newer (a refill)", at("m1", 3, 100), at("m1", 3, 200), "take_carried"],
    ["same model and width, carried older (a stale copy)", at("m1", 3, 200), at("m1", 3, 100), "keep_local"],
    ["same model and width, same moment (a replay of what is here)", at("m1", 3, 100), at("m1", 3, 100), "keep_local"],
    ["another model, carried older: a stale copy never erases a vector filled since", at("m2", 3, 200), at("m1", 3, 100), "keep_local"],
    ["another width, carried older: likewise", at("m1", 4, 200), at("m1", 3, 100), "keep_local"],
  ] as const)("%s", (_name, local, carried, want) => {
    expect(mergeVector(local, carried)).toBe(want);
  });

  test("replaying any carried copy twice changes nothing the second time", () => {
    const stamps = [at("m1", 3, 100), at("m2", 3, 150), at("m1", 4, 200), at("m1", 3, 300)];
    for (const local of [null, ...stamps]) {
      for (const carried of stamps) {
        const after = mergeVector(local, carried) === "take_carried" ? carried : local;
        expect(mergeVector(after, carried)).toBe("keep_local");
      }
    }
  });
});

describe("the vector's wire encoding", () => {
  test("exact float32 round trip, little-endian whatever the host", () => {
    const v = Float32Array.from([0.1, -1.5, 3.4e38, 1e-45, 0, -0]);
    const bytes = base64ToBytes(encodeVector(v))!;
    expect([...floatsOf(bytes, v.length)!]).toEqual([...v]);
    // 1.0f is 00 00 80 3f little-endian.
    expect([...vectorBytes(Float32Array.from([1]))]).toEqual([0x00, 0x00, 0x80, 0x3f]);
    // 1,536 dims: 8 KiB on the wire.
    expect(encodeVector(new Float32Array(1_536)).length).toBe(8_192);
  });

  test.each([
    ["not base64", "abc!"],
    ["a length base64 cannot have", "AAAAA"],
  ] as const)("refused: %s", (_n, s) => {
    expect(base64ToBytes(s)).toBeNull();
  });

  test("bytes that are not dims finite floats are refused", () => {
    expect(floatsOf(vectorBytes(Float32Array.from([1, 2])), 3)).toBeNull();
    expect(floatsOf(vectorBytes(Float32Array.from([1, Number.NaN])), 2)).toBeNull();
    expect(floatsOf(vectorBytes(Float32Array.from([Number.POSITIVE_INFINITY])), 1)).toBeNull();
  });
});

describe("a vector record decodes against its one schema", () => {
  const good: VectorRow = { id: "dabc", handle: "ops", model: "nomic-embed-text", dims: 3, embedded_at: 5, vector: encodeVector(Float32Array.from([1, 2, 3])) };
  test("a good one, under either table", () => {
    expect(decodeRecord({ table: "diary_vectors", row: good }).ok).toBe(true);
    expect(decodeRecord({ table: "episode_vectors", row: good }).ok).toBe(true);
  });
  test.each([
    ["a width that does not match the bytes", { dims: 4 }, "row.vector"],
    ["a NaN among the floats", { vector: encodeVector(Float32Array.from([1, Number.NaN, 3])) }, "row.vector"],
    ["a vector that is not base64", { vector: "not base64!" }, "row.vector"],
    ["no model", { model: "" }, "row.model"],
    ["a width past the bound", { dims: MAX_VECTOR_DIMS + 1 }, "row.dims"],
    ["a row id that is no subject token", { id: "a.b" }, "row.id"],
    ["a field the schema does not know", { kind: "diary" }, "row"],
  ] as const)("refused, naming the field: %s", (_n, over, field) => {
    const d = decodeRecord({ table: "diary_vectors", row: { ...good, ...over } });
    expect(d.ok).toBe(false);
    expect(d.ok ? "" : d.error.split(":")[0]).toBe(field);
  });
});
