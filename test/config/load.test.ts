import { expect, test } from "bun:test";
import { ConfigError, parseConfig, readCompanyText } from "../../src/config/load.ts";
import { companySchema } from "../../src/config/company.ts";
import { MAX_BODY_BYTES } from "../../src/api/errors.ts";
import { tierAJsonSchema } from "../../src/config/json-schema.ts";

function refuse(yaml: string, env: Record<string, string> = {}): ConfigError {
  try {
    parseConfig(yaml, "test.yaml", env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected the file to be refused");
}

test("${VAR} and ${VAR:-default} expand from the environment", () => {
  const { config, nodeId } = parseConfig(
    `node: {id: "\${CREWLET_NODE_ID}", labels: {zone: "\${ZONE:-eu}"}}\napi: {port: 7711}\n`,
    "x",
    { CREWLET_NODE_ID: "node-7" },
  );
  expect(nodeId).toBe("node-7");
  expect(config.node.labels).toEqual({ zone: "eu" });
});

test("a missing variable is refused naming the field", () => {
  const err = refuse(`node: {id: "\${NOPE}"}\n`);
  expect(err.problems).toContainEqual({ path: "node.id", message: expect.stringContaining("NOPE") });
});

test("unknown keys are refused with the key and line", () => {
  const err = refuse(`node:\n  id: a\n  rolez: [data]\n`);
  const p = err.problems.find((p) => p.path === "node");
  expect(p?.message).toContain('unknown key "rolez"');
  expect(p?.message).toContain("line 2");
});

test("wrong types name the field", () => {
  const err = refuse(`api: {port: "eighty"}\n`);
  expect(err.problems[0]?.path).toBe("api.port");
});

test("a short token is refused", () => {
  const err = refuse(`api: {tokens: [{id: ops, token: short}]}\n`);
  expect(err.problems[0]?.path).toBe("api.tokens[0].token");
});

test("grants default to all of them", () => {
  const { config } = parseConfig(`api: {tokens: [{id: ops, token: "${"t".repeat(24)}"}]}\n`, "x", {});
  expect(config.api.tokens[0]?.grants).toContain("fleet:operate");
});

test("YAML syntax errors are reported, not thrown raw", () => {
  const err = refuse(`node: {id: [\n`);
  expect(err.message).toContain("YAML");
});

test("company cross-references are checked", () => {
  const err = refuse(`company:
  name: Acme
  roles:
    - {name: CEO, manages: [cto, ghost]}
    - {name: CTO, handle: cto, manages: [ceo]}
    - {name: Other, handle: cto}
  units:
    - {name: Eng, lead: nobody, roles: [cto]}
`);
  const paths = err.problems.map((p) => p.path);
  expect(paths).toContain("company.roles[0].manages[1]");
  expect(paths).toContain("company.roles[2].handle");
  expect(paths).toContain("company.units[0].lead");
  expect(err.problems.some((p) => p.message.includes("cycle"))).toBe(true);
});

test("handles derive from role names", () => {
  const { config } = parseConfig(`company: {name: Acme, roles: [{name: "Chief Executive"}]}\n`, "x", {});
  expect(config.company?.roles[0]?.handle).toBe("chief-executive");
});

test("the JSON Schema covers every top-level section and refuses unknown keys", () => {
  const schema = tierAJsonSchema() as { properties: Record<string, unknown>; additionalProperties: unknown };
  expect(Object.keys(schema.properties).sort()).toEqual(["api", "company", "coordination", "logging", "node", "objects", "store", "stream", "testing"]);
  expect(schema.additionalProperties).toBe(false);
});

test("a handle that would name another seat's control or reflect group is refused", () => {
  const given = refuse(`company: {name: Acme, roles: [{name: Bob}, {name: "Bob Control", handle: bob-control}]}\n`);
  expect(given.problems.map((p) => p.path)).toContain("company.roles[1].handle");
  const derived = refuse(`company: {name: Acme, roles: [{name: Ops}, {name: "Ops Reflect"}]}\n`);
  expect(derived.problems.map((p) => p.path)).toContain("company.roles[1].handle");
});

test("config apply's body: the document as written parses to the same company and, for 10,000 seats, fits the API's limit where the filled form does not", () => {
  const roles = Array.from({ length: 10_000 }, (_, i) => `  - {name: Agent a${i}, handle: a${i}, placement: {labels: {pool: main}}}`).join("\n");
  const text = `company:\n  name: Big\n  roles:\n${roles}\n`;
  const { company, input } = readCompanyText(text, "big.yaml", {});
  expect(companySchema.parse(input)).toEqual(company);
  const written = Buffer.byteLength(JSON.stringify({ company: input }));
  const filled = Buffer.byteLength(JSON.stringify({ company }));
  expect(written).toBeLessThan(MAX_BODY_BYTES);
  expect(filled).toBeGreaterThan(MAX_BODY_BYTES);
  // Environment references are expanded in what is sent, as in what was checked.
  const withEnv = readCompanyText("company:\n  name: ${CO_NAME}\n  roles: [{name: CEO, handle: ceo}]\n", "e.yaml", { CO_NAME: "Acme" });
  expect(withEnv.input).toMatchObject({ name: "Acme" });
  expect(companySchema.parse(withEnv.input)).toEqual(withEnv.company);
});
