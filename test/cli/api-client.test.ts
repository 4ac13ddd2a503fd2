// Where the CLI sends a request and with which token (src/cli/api-client.ts resolveTarget),
// by table, against a real store dir holding a minted token as `crewlet run` leaves it.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadOrMintToken } from "../../src/api/auth.ts";
import { DEFAULT_URL, resolveTarget } from "../../src/cli/api-client.ts";

const store = mkdtempSync(join(tmpdir(), "crewlet-cli-store-"));
const minted = loadOrMintToken(store).token.token;
const empty = mkdtempSync(join(tmpdir(), "crewlet-cli-empty-"));
afterAll(() => {
  rmSync(store, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});

const GIVEN = "given-token-0123456789abcdef";
const FROM_ENV = "env-token-0123456789abcdefgh";

test.each([
  ["--token wins over everything", { token: GIVEN }, { CREWLET_TOKEN: FROM_ENV, CREWLET_STORE: store }, { url: DEFAULT_URL, token: GIVEN }],
  ["CREWLET_TOKEN wins over the store", {}, { CREWLET_TOKEN: FROM_ENV, CREWLET_STORE: store }, { url: DEFAULT_URL, token: FROM_ENV }],
  ["the default URL: the node on this box, its minted token", {}, { CREWLET_STORE: store }, { url: DEFAULT_URL, token: minted }],
  ["localhost is this box", { url: "http://localhost:7700/" }, { CREWLET_STORE: store }, { url: "http://localhost:7700", token: minted }],
  ["::1 is this box", { url: "http://[::1]:7700" }, { CREWLET_STORE: store }, { url: "http://[::1]:7700", token: minted }],
] as const)("%s", (_name, values, env, want) => {
  expect(resolveTarget(values, env)).toEqual(want);
});

test.each([
  ["a remote node never gets this box's token", { url: "http://10.0.0.7:7700" }, { CREWLET_STORE: store }, "no API token"],
  ["a host named like loopback is not loopback", { url: "http://127.0.0.1.example.com:7700" }, { CREWLET_STORE: store }, "no API token"],
  ["no token anywhere", {}, { CREWLET_STORE: empty }, "no API token"],
  ["a URL that is none", { url: "not a url" }, { CREWLET_STORE: store }, "is not a URL"],
] as const)("%s: refused", (_name, values, env, why) => {
  expect(() => resolveTarget(values, env)).toThrow(why);
});
