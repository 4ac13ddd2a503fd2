import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockStoreDir, StoreLockedError } from "../../src/node/store-lock.ts";

const dir = mkdtempSync(join(tmpdir(), "crewlet-lock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const holderScript = `
import { lockStoreDir } from ${JSON.stringify(join(import.meta.dir, "../../src/node/store-lock.ts"))};
lockStoreDir(process.argv[2]);
console.log("locked");
await Bun.sleep(60_000);
`;

test("a second process cannot take the lock; kill -9 of the holder frees it", async () => {
  const script = join(dir, "holder.ts");
  await Bun.write(script, holderScript);
  const child = Bun.spawn([process.execPath, script, join(dir, "store")], { stdout: "pipe" });
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  expect(new TextDecoder().decode(value)).toContain("locked");
  expect(() => lockStoreDir(join(dir, "store"))).toThrow(StoreLockedError);
  child.kill("SIGKILL");
  await child.exited;
  const lock = lockStoreDir(join(dir, "store"));
  lock.release();
});

test("release lets the same process lock again", () => {
  const a = lockStoreDir(join(dir, "s2"));
  a.release();
  const b = lockStoreDir(join(dir, "s2"));
  b.release();
});
