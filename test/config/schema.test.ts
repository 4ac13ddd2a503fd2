// The JSON Schema (`crewlet schema`) accepts every example config in the repo: the root
// crewlet.yaml and each complete config among the README's and the install notes' YAML
// blocks — the files people copy. Each is also loaded by the real loader (with the
// variables it references set), so the schema and the zod schema agree on them.
import { expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import Ajv2020 from "ajv/dist/2020";
import { parse } from "yaml";
import { tierAJsonSchema } from "../../src/config/json-schema.ts";
import { parseConfig } from "../../src/config/load.ts";
import { tierASchema } from "../../src/config/tier-a.ts";

const ROOT = resolve(import.meta.dir, "../..");
const TIER_A_KEYS = new Set(Object.keys(tierASchema.shape));

interface Example {
  where: string;
  text: string;
}

/** Every YAML file in the repo, and every ```yaml block of every Markdown file, that is a whole config. */
function examples(): Example[] {
  const files = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
  const out: Example[] = [];
  const consider = (where: string, text: string) => {
    let doc: unknown;
    try {
      doc = parse(text);
    } catch {
      return; // a fragment (e.g. a few indented lines of a larger file)
    }
    if (!doc || typeof doc !== "object" || Array.isArray(doc)) return;
    const keys = Object.keys(doc);
    if (keys.length > 0 && keys.every((k) => TIER_A_KEYS.has(k))) out.push({ where, text });
  };
  for (const f of files) {
    if (f.startsWith("test/")) continue;
    if (/\.ya?ml$/.test(f)) consider(f, readFileSync(join(ROOT, f), "utf8"));
    if (f.endsWith(".md")) {
      const md = readFileSync(join(ROOT, f), "utf8");
      let i = 0;
      for (const m of md.matchAll(/```ya?ml\n([\s\S]*?)```/g)) consider(`${f} yaml block ${++i}`, m[1]!);
    }
  }
  return out;
}

/** Values for the ${VAR}s an example references: ids where ids go, long secrets elsewhere. */
function envFor(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)) env[m[1]!] = /NODE_ID/.test(m[1]!) ? "node-1" : "s".repeat(32);
  return env;
}

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
const validate = ajv.compile(tierAJsonSchema());

test("the schema accepts every example config in the repo, and the loader loads each", () => {
  const found = examples();
  // The root file and the README's fleet and leaf snippets at least.
  expect(found.map((e) => e.where)).toContain("crewlet.yaml");
  expect(found.filter((e) => e.where.startsWith("README.md")).length).toBeGreaterThanOrEqual(2);
  for (const e of found) {
    const ok = validate(parse(e.text));
    expect({ where: e.where, errors: ok ? [] : validate.errors }).toEqual({ where: e.where, errors: [] });
    expect(() => parseConfig(e.text, e.where, envFor(e.text))).not.toThrow();
  }
});

test("the schema still refuses what the loader refuses, and takes a ${VAR} wherever the loader does", () => {
  const v = (doc: unknown) => validate(doc) as boolean;
  expect(v({ node: { id: "bad id!" } })).toBe(false);
  expect(v({ node: { nickname: "x" } })).toBe(false);
  expect(v({ api: { port: 70000 } })).toBe(false);
  expect(v({ api: { port: "7700" } })).toBe(false);
  expect(v({ node: { id: "Node-A" } })).toBe(true);
  expect(v({ node: { id: "${CREWLET_NODE_ID:-node-0}" } })).toBe(true);
  expect(v({ api: { port: "${PORT}", tokens: [{ id: "ops", token: "${TOKEN}" }] }, logging: { stderr: "${ERR:-true}" } })).toBe(true);
  expect(v({ stream: { leaf: { urls: ["nats://${HUB}:7422"] } } })).toBe(true);
});
