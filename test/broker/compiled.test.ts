// The compiled binary's path: build.ts embeds the pinned nats-server (refusing the wrong
// machine or the wrong bytes), and the binary extracts it by hash into the store dir and
// runs it. Built for this machine's architecture only, from a minimal entry; the arm64
// build and its qemu smoke run in `bun run build.ts`.
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildArch, loadManifest, REQUIRE_SMOKE_ENV, smokeVersion, verifiedSidecar } from "../../build.ts";
import { hostArch } from "../../src/broker/elf.ts";
import { cachedSidecarPath } from "../../src/broker/manifest.ts";
import { brokerPaths } from "../../src/broker/plan.ts";
import { singleMemberPlan } from "./fixtures/plans.ts";

const work = mkdtempSync(join(tmpdir(), "crewlet-build-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("sidecar checks", () => {
  const manifest = loadManifest();
  // The pinned build for this machine (scripts/setup.sh leaves it there).
  const pinned = cachedSidecarPath(manifest.version, hostArch());
  test("the pinned build for this machine passes", () => {
    expect(verifiedSidecar(pinned, hostArch(), manifest).length).toBeGreaterThan(0);
  });
  test("a sidecar built for another machine is refused", () => {
    const other = hostArch() === "x64" ? "arm64" : "x64";
    expect(() => verifiedSidecar(pinned, other, manifest)).toThrow(/ELF machine .* not (x64|arm64).*refusing/);
  });
  test("a sidecar whose bytes differ from the pin is refused", () => {
    const copy = join(work, "nats-server-tampered");
    copyFileSync(pinned, copy);
    writeFileSync(copy, new Uint8Array([0]), { flag: "a" });
    expect(() => verifiedSidecar(copy, hostArch(), manifest)).toThrow(/sha256 .* pins/);
  });
  test("a file that is not ELF is refused", () => {
    const script = join(work, "not-elf");
    writeFileSync(script, "#!/bin/sh\necho i am not nats-server\n");
    expect(() => verifiedSidecar(script, hostArch(), manifest)).toThrow(/not an ELF file/);
  });
});

describe("the foreign arch's version smoke", () => {
  const foreign = hostArch() === "x64" ? "arm64" : "x64";
  // Never run: the emulator named here is not on any machine.
  const built = { arch: foreign, path: join(work, `crewlet-linux-${foreign}`), bytes: 0, sidecar_zst_bytes: 0 } as const;
  const qemu = { [foreign]: { bin: "crewlet-no-such-qemu", ld: "/nonexistent" } };
  test("without its emulator it fails when required (as .ci/run requires it)", () => {
    expect(() => smokeVersion(built, { required: true, qemu })).toThrow(/not run under qemu \(crewlet-no-such-qemu is not on PATH\)/);
  });
  test("without its emulator it is skipped, saying so, when not required", () => {
    expect(smokeVersion(built, { required: false, qemu })).toStartWith("not run (crewlet-no-such-qemu is not on PATH;");
  });
  test(`${REQUIRE_SMOKE_ENV}=1 is what requires it`, () => {
    const before = process.env[REQUIRE_SMOKE_ENV];
    try {
      process.env[REQUIRE_SMOKE_ENV] = "1";
      expect(() => smokeVersion(built, { qemu })).toThrow(/requires it/);
      delete process.env[REQUIRE_SMOKE_ENV];
      expect(smokeVersion(built, { qemu })).toStartWith("not run");
    } finally {
      if (before === undefined) delete process.env[REQUIRE_SMOKE_ENV];
      else process.env[REQUIRE_SMOKE_ENV] = before;
    }
  });
});

test("the compiled binary carries its own arch's sidecar, extracts it once by hash and runs it", async () => {
  const arch = hostArch();
  const { version } = loadManifest();
  const built = buildArch(arch, join(import.meta.dir, "fixtures", "compiled-entry.ts"), { outDir: join(work, "dist") });
  expect(smokeVersion(built)).toContain(`embedded nats-server ${version} ${arch}`);

  const store = join(work, "store");
  const plan = await singleMemberPlan(store);
  const planFile = join(work, "plan.json");
  writeFileSync(planFile, JSON.stringify(plan));
  const run = () => {
    const r = Bun.spawnSync([built.path, "run", planFile], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(r.exitCode).toBe(0);
    return { out: JSON.parse(r.stdout.toString()) as { ready_pid: number }, log: r.stderr.toString() };
  };
  const first = run();
  expect(first.out.ready_pid).toBeGreaterThan(0);
  expect(first.log).toContain('"event":"nats_binary_extracted"');
  const bins = readdirSync(brokerPaths(store).binDir);
  expect(bins).toEqual([expect.stringMatching(new RegExp(`^nats-server-${version.replaceAll(".", "\\.")}-${arch}-[0-9a-f]{16}$`))]);
  const extracted = join(brokerPaths(store).binDir, bins[0]!);
  expect(statSync(extracted).mode & 0o111).toBe(0o111);
  const inode = statSync(extracted).ino;

  // A second boot finds the intact copy and does not rewrite it.
  const second = run();
  expect(second.log).not.toContain("nats_binary_extracted");
  expect(statSync(extracted).ino).toBe(inode);

  // A damaged copy is noticed and replaced (by rename, never written in place).
  writeFileSync(extracted, new Uint8Array([0]), { flag: "a" });
  const third = run();
  expect(third.log).toContain('"event":"nats_binary_damaged"');
  expect(third.log).toContain('"event":"nats_binary_extracted"');
  expect(statSync(extracted).ino).not.toBe(inode);
});
