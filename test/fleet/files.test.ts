// Files on a real three-member fleet (R3): a file uploaded through member a survives
// kill -9 of a and is read, byte for byte and with its content type, from member b (and
// listed from c). Then a, restarted with another object store configured, refuses to boot
// naming both stores (exit 2, objects_store_mismatch); with the fleet's store it rejoins.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { parse, stringify } from "yaml";
import { makeFleet, TEST_TOKEN, waitFor, type Fleet, type FleetNode } from "../support/fleet.ts";

const TTL_S = 6;
/** Generous: a loaded 2-core box boots a member in well under this. */
const READY_WITHIN_MS = 120_000;
const TEST_TIMEOUT_MS = 300_000;
/** Over the 128 KiB chunk, so the object is several messages on every replica. */
const FILE_BYTES = 700_000;

let fleet: Fleet;
beforeAll(async () => {
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member" },
      { id: "b", kind: "member" },
      { id: "c", kind: "member" },
    ],
    leaseTtlSeconds: TTL_S,
    company: { name: "Files", providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } }, default_llm: "script", roles: [{ name: "Agent", handle: "agent-0" }] },
  });
  await Promise.all(fleet.nodes.map((n) => n.start()));
  await Promise.all(fleet.nodes.map((n) => n.waitReady(READY_WITHIN_MS)));
}, 2 * READY_WITHIN_MS);
afterAll(async () => {
  await fleet?.stop();
});

const auth = { authorization: `Bearer ${TEST_TOKEN}` };

function logs(): string {
  return fleet.nodes.map((n) => `--- ${n.id}\n${n.log().slice(-2000)}`).join("\n");
}

/** A read that may meet a member's election: retried until it answers 200. */
function readOk(node: FleetNode, path: string): Promise<Response> {
  return waitFor(`${node.id} answers ${path}`, async () => {
    const r = await fetch(`${node.apiUrl}${path}`, { headers: auth }).catch(() => null);
    return r && r.status === 200 ? r : null;
  }, 60_000, logs);
}

test(
  "an upload survives kill -9 of the node that stored it and is read from another member",
  async () => {
    const a = fleet.node("a");
    const created = await a.post("/work", { title: "needs a file" });
    expect(created.status).toBe(200);
    const { key } = (await created.json()) as { key: string };
    const bytes = new Uint8Array(FILE_BYTES).map((_, i) => (i * 31 + 7) % 251);
    const up = await fetch(`${a.apiUrl}/work/${key}/files?name=trace.bin`, { method: "POST", headers: { ...auth, "content-type": "application/vnd.crewlet.trace" }, body: bytes });
    expect(up.status).toBe(200);
    const { file } = (await up.json()) as { file: string };

    a.kill("SIGKILL");
    await a.exited();

    const b = fleet.node("b");
    const down = await readOk(b, `/work/${key}/files/${file}`);
    expect(down.headers.get("content-type")).toBe("application/vnd.crewlet.trace");
    const got = new Uint8Array(await down.arrayBuffer());
    expect(got.byteLength).toBe(FILE_BYTES);
    expect(createHash("sha256").update(got).digest("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));
    const listed = (await (await readOk(fleet.node("c"), `/work/${key}/files`)).json()) as { files: { id: string; size: number }[] };
    expect(listed.files).toEqual([expect.objectContaining({ id: file, size: FILE_BYTES })]);
  },
  TEST_TIMEOUT_MS,
);

test(
  "a node configured with another object store refuses to boot, naming both; with the fleet's it rejoins",
  async () => {
    const a = fleet.node("a");
    const original = readFileSync(a.configFile, "utf8");
    const config = parse(original) as Record<string, unknown>;
    writeFileSync(a.configFile, stringify({ ...config, objects: { type: "nats", bucket: "other_files" } }));
    await a.start();
    expect(await a.exited()).toBe(2);
    const refusal = a.events("objects_store_mismatch");
    expect(refusal.length).toBe(1);
    expect(String(refusal[0]!.message)).toContain("nats:crewlet_files");
    expect(String(refusal[0]!.message)).toContain("nats:other_files");

    writeFileSync(a.configFile, original);
    await a.start();
    await a.waitReady(READY_WITHIN_MS);
  },
  TEST_TIMEOUT_MS,
);
