import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { elfMachine, elfMachineOfFile } from "../../src/broker/elf.ts";
import { parseNatsLogLine, serverIdFrom } from "../../src/broker/nats-log.ts";
import { isOurSidecar, readPidFile } from "../../src/broker/process.ts";
import { binaryFromSource, parseAssetName, sidecarAssetName } from "../../src/broker/binary.ts";
import { wrapperArgv } from "../../src/broker/sidecar.ts";

describe("parseNatsLogLine", () => {
  const cases: [string, { level: string; msg: string } | null][] = [
    ["[123] [INF] Starting nats-server", { level: "debug", msg: "Starting nats-server" }],
    ["[123] 2026/01/01 10:00:00.123456 [WRN] slow consumer", { level: "warn", msg: "slow consumer" }],
    ["[9] [ERR] route failed", { level: "error", msg: "route failed" }],
    ["[9] [FTL] cannot listen", { level: "error", msg: "cannot listen" }],
    ["[9] [DBG] x", { level: "debug", msg: "x" }],
    ["[9] [TRC] x", { level: "debug", msg: "x" }],
    ["[9] [WRN] Plaintext passwords detected, use nkeys or bcrypt", { level: "debug", msg: "Plaintext passwords detected, use nkeys or bcrypt" }],
    ["panic: something odd", { level: "info", msg: "panic: something odd" }],
    ["   ", null],
  ];
  for (const [raw, want] of cases) test(raw, () => expect(parseNatsLogLine(raw)).toEqual(want as never));

  test("server id line", () => {
    const id = "N" + "A".repeat(55);
    expect(serverIdFrom(`  ID:       ${id}`)).toBe(id);
    expect(serverIdFrom("  Name:     a")).toBeNull();
  });
});

describe("elfMachine", () => {
  const header = (machine: number) => {
    const h = new Uint8Array(20);
    h.set([0x7f, 0x45, 0x4c, 0x46, 2, 1], 0);
    h[18] = machine & 0xff;
    h[19] = machine >> 8;
    return h;
  };
  test("x86-64", () => expect(elfMachine(header(62)).arch).toBe("x64"));
  test("aarch64", () => expect(elfMachine(header(183)).arch).toBe("arm64"));
  test("another machine is named by number", () => expect(elfMachine(header(40))).toEqual({ e_machine: 40, arch: null }));
  test("not ELF", () => expect(() => elfMachine(new TextEncoder().encode("#!/bin/sh\necho hello there"))).toThrow(/bad magic/));
  test("the nats-server a source run uses is built for this machine", () => {
    expect(elfMachineOfFile(binaryFromSource().path).arch).toBe(process.arch as "x64" | "arm64");
  });
});

describe("isOurSidecar", () => {
  const conf = "/store/broker/nats-server.conf";
  const cases: [string[] | null, boolean][] = [
    [["/repo/appliance/cache/nats-server-2.15.2-x64", "-c", conf], true],
    [["/store/bin/nats-server-2.15.2-x64-abcdef", "-c", conf], true],
    [["/repo/appliance/cache/nats-server-2.15.2-x64", "-c", "/other/nats-server.conf"], false],
    [["/usr/bin/sleep", "-c", conf], false],
    [["/repo/appliance/cache/nats-server-2.15.2-x64"], false],
    [null, false],
  ];
  for (const [argv, want] of cases) test(JSON.stringify(argv), () => expect(isOurSidecar(argv, conf)).toBe(want));
});

describe("readPidFile", () => {
  test("absent, valid, garbled, wrong shape", () => {
    const dir = mkdtempSync(join(tmpdir(), "crewlet-pid-"));
    try {
      const p = join(dir, "pid");
      expect(readPidFile(p)).toEqual({ ok: true, value: null });
      writeFileSync(p, JSON.stringify({ pid: 42, binary: "b", config: "c" }));
      expect(readPidFile(p)).toEqual({ ok: true, value: { pid: 42, binary: "b", config: "c" } });
      writeFileSync(p, "{not json");
      expect(readPidFile(p).ok).toBe(false);
      writeFileSync(p, JSON.stringify({ pid: "42", binary: "b", config: "c" }));
      const bad = readPidFile(p);
      expect(bad.ok).toBe(false);
      if (!bad.ok) expect(bad.error).toContain("field pid");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("embedded asset name", () => {
  test("round trip", () => {
    const sha = "ab".repeat(32);
    expect(parseAssetName(sidecarAssetName("2.9.10", "arm64", sha))).toEqual({ version: "2.9.10", arch: "arm64", sha256: sha });
    expect(parseAssetName("crewlet-sidecar-2.9.10-ppc64-x.zst")).toBeNull();
  });
});

describe("wrapperArgv", () => {
  test("setsid then setpriv --pdeathsig KILL when both exist", () => {
    expect(wrapperArgv((c) => `/usr/bin/${c}`)).toEqual({
      argv: ["/usr/bin/setsid", "/usr/bin/setpriv", "--pdeathsig", "KILL", "--"],
      pdeathsig: true,
    });
  });
  test("without util-linux the child is spawned bare and says so", () => {
    expect(wrapperArgv(() => null)).toEqual({ argv: [], pdeathsig: false });
  });
});
