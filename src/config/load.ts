// Loading a Tier A file: YAML → ${VAR} expansion → zod → the config checks (checks.ts).
// Every problem is reported as {path, message} with the YAML line when the path exists in
// the file, and nothing is half-applied: a file is either all valid or refused. A file is
// input from outside like any other: a syntax error names its line and column, and an
// alias bomb or an alias to nothing is refused as a problem, never a stack trace.
import { readFileSync } from "node:fs";
import { isAlias, isMap, isScalar, isSeq, LineCounter, parse as parseYaml, parseDocument, visit, Scalar, type Document } from "yaml";
import type { z } from "zod";
import { tierASchema, DEFAULT_NODE_ID, TESTING_ENV, type TierA } from "./tier-a.ts";
import { companySchema, type Company } from "./company.ts";
import { configProblems } from "./checks.ts";
import type { ConfigProblem } from "./topology.ts";

export type { ConfigProblem };

export class ConfigError extends Error {
  constructor(readonly source: string, readonly problems: ConfigProblem[]) {
    super(`${source}: invalid configuration\n` + problems.map((p) => `  ${p.path || "(root)"}: ${p.message}`).join("\n"));
    this.name = "ConfigError";
  }
}

export interface LoadedConfig {
  config: TierA;
  /** The node id in force (node.id, or node-0 for a lone node). */
  nodeId: string;
  source: string;
}

/**
 * Aliases one file may expand to. A config has no need of many; the yaml library's own
 * default (100) is the bound that refuses a "billion laughs" file before it is expanded.
 */
export const MAX_ALIAS_COUNT = 100;

/** Syntax errors listed for one file: the first is the one to fix. */
const MAX_YAML_ERRORS_SHOWN = 3;

const VAR_RE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;
/** A scalar that is one reference and nothing else. */
const WHOLE_REF_RE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/;

/**
 * Expands ${VAR} and ${VAR:-default} in every string value; a missing variable is a
 * problem. A plain (unquoted) scalar that is one reference (`port: ${PORT}`) takes the type
 * its value would have had written there — a number, true or false — so numeric and
 * boolean fields take references too; a quoted one stays a string.
 */
export function expandEnv(
  value: unknown,
  env: Record<string, string | undefined>,
  path: string[],
  problems: ConfigProblem[],
  plainRefs: ReadonlySet<string> = new Set(),
): unknown {
  if (typeof value === "string") {
    const expanded = value.replace(VAR_RE, (_all, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined && v !== "") return v;
      if (fallback !== undefined) return fallback;
      problems.push({ path: formatPath(path), message: `environment variable ${name} is not set` });
      return "";
    });
    if (WHOLE_REF_RE.test(value) && plainRefs.has(formatPath(path))) return typedScalar(expanded);
    return expanded;
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, [...path, String(i)], problems, plainRefs));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expandEnv(v, env, [...path, k], problems, plainRefs)]));
  }
  return value;
}

/** What YAML would make of `text` written as a plain scalar, kept only when it is a number or boolean. */
function typedScalar(text: string): unknown {
  if (text.trim() === "") return text;
  try {
    const v: unknown = parseYaml(text, { schema: "core" });
    return typeof v === "number" || typeof v === "boolean" ? v : text;
  } catch {
    return text;
  }
}

export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number" || /^\d+$/.test(String(p))) out += `[${String(p)}]`;
    else out += out ? `.${String(p)}` : String(p);
  }
  return out;
}

function lineOf(doc: Document, counter: LineCounter, path: readonly PropertyKey[]): number | undefined {
  // Walk down as far as the file goes: a missing key is reported at its parent.
  let node: unknown = doc.contents;
  let found: unknown = node;
  for (const p of path) {
    if (isMap(node)) node = node.get(String(p), true);
    else if (isSeq(node)) node = node.get(Number(p), true);
    else break;
    if (node === undefined) break;
    found = node;
  }
  const range = (found as { range?: [number, number, number] } | undefined)?.range;
  return range ? counter.linePos(range[0]).line : undefined;
}

/** The paths of plain scalars that are one ${VAR} reference (see expandEnv). */
function plainReferencePaths(doc: Document): Set<string> {
  const out = new Set<string>();
  // Bounded by the document itself: the walk visits each node once (aliases are not followed).
  const walk = (node: unknown, path: (string | number)[]) => {
    if (isMap(node)) {
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        walk(pair.value, [...path, key]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => walk(item, [...path, i]));
    } else if (isScalar(node) && node.type === Scalar.PLAIN && typeof node.value === "string" && WHOLE_REF_RE.test(node.value)) {
      out.add(formatPath(path));
    }
  };
  walk(doc.contents, []);
  return out;
}

function zodProblems(err: z.ZodError): ConfigProblem[] {
  return err.issues.map((i) => {
    let message = i.message;
    if (i.code === "unrecognized_keys") message = `unknown key${i.keys.length > 1 ? "s" : ""} ${i.keys.map((k) => `"${k}"`).join(", ")}`;
    return { path: formatPath(i.path), message };
  });
}

interface ReadYaml {
  doc: Document;
  counter: LineCounter;
  raw: Record<string, unknown>;
}

/** Parses YAML text into a mapping, or throws ConfigError naming each syntax problem's line and column. */
function readYaml(text: string, source: string): ReadYaml {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  const at = (offset: number | undefined) => {
    if (offset === undefined) return "";
    const { line, col } = counter.linePos(offset);
    return ` (line ${line}, column ${col})`;
  };
  if (doc.errors.length > 0) {
    // The first few: after one syntax error the parser's later complaints are mostly echoes.
    const shown = doc.errors.slice(0, MAX_YAML_ERRORS_SHOWN).map((e) => ({ path: "", message: `YAML: ${e.message.split("\n")[0]}${at(e.pos?.[0])}` }));
    if (doc.errors.length > shown.length) shown.push({ path: "", message: `YAML: … and ${doc.errors.length - shown.length} more after these` });
    throw new ConfigError(source, shown);
  }
  // An alias to an anchor that is not (yet) defined: named where it is, before toJS.
  const unresolved: ConfigProblem[] = [];
  visit(doc, {
    Alias(_key, node) {
      if (node.resolve(doc) === undefined) unresolved.push({ path: "", message: `YAML: alias *${node.source} names no anchor defined before it${at(node.range?.[0])}` });
    },
  });
  if (unresolved.length > 0) throw new ConfigError(source, unresolved);
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) ?? {};
  } catch (err) {
    // The yaml library refuses an alias bomb (and anything else it cannot build) by throwing.
    const message = /alias count/i.test((err as Error).message)
      ? `YAML: aliases expand past ${MAX_ALIAS_COUNT} nodes (a resource-exhaustion pattern); write the values out`
      : `YAML: ${(err as Error).message}`;
    throw new ConfigError(source, [{ path: "", message }]);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ConfigError(source, [{ path: "", message: "expected a mapping at the top level" }]);
  return { doc, counter, raw: raw as Record<string, unknown> };
}

function withLines(doc: Document, counter: LineCounter, problems: ConfigProblem[]): ConfigProblem[] {
  return problems.map((p) => {
    const line = p.path ? lineOf(doc, counter, p.path.split(/\.|\[|\]/).filter(Boolean)) : undefined;
    return line ? { ...p, message: `${p.message} (line ${line})` } : p;
  });
}

/** Parses Tier A text. Throws ConfigError listing every problem. */
export function parseConfig(text: string, source = "crewlet.yaml", env: Record<string, string | undefined> = process.env): LoadedConfig {
  const { doc, counter, raw } = readYaml(text, source);
  const problems: ConfigProblem[] = [];
  const expanded = expandEnv(raw, env, [], problems, plainReferencePaths(doc));
  const parsed = tierASchema.safeParse(expanded);
  if (!parsed.success) problems.push(...zodProblems(parsed.error));
  else problems.push(...configProblems(parsed.data));
  if (parsed.success && parsed.data.testing !== undefined && env[TESTING_ENV] !== "1") {
    problems.push({ path: "testing", message: `test-only settings are refused outside tests (${TESTING_ENV}=1 is not set)` });
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(source, withLines(doc, counter, problems));
  return { config: parsed.data, nodeId: parsed.data.node.id ?? DEFAULT_NODE_ID, source };
}

/**
 * A company on its own, for `crewlet config apply`: a crewlet.yaml (its `company:` is
 * taken) or a file holding just the company. ${VAR} expands as in Tier A; every problem is
 * named with its path and line, as for a node's own file.
 */
export function parseCompanyText(text: string, source: string, env: Record<string, string | undefined> = process.env): Company {
  return readCompanyText(text, source, env).company;
}

/**
 * As parseCompanyText, and the document as written (environment references expanded,
 * defaults not filled in), which the schema parses to the same company: what
 * `crewlet config apply` sends, because the node fills in its own defaults and the filled
 * form is several times larger (10,000 seats: 1.36 MB filled, over the API's 1 MiB body
 * limit; 0.45 MB as written).
 */
export function readCompanyText(text: string, source: string, env: Record<string, string | undefined> = process.env): { company: Company; input: unknown } {
  const { doc, counter, raw } = readYaml(text, source);
  const wrapped = "company" in raw;
  const prefix = wrapped ? ["company"] : [];
  const problems: ConfigProblem[] = [];
  const expanded = expandEnv(wrapped ? raw.company : raw, env, prefix, problems, plainReferencePaths(doc));
  const parsed = companySchema.safeParse(expanded);
  if (!parsed.success) {
    for (const p of zodProblems(parsed.error)) problems.push({ path: formatPath([...prefix, ...(p.path ? p.path.split(/\.|\[|\]/).filter(Boolean) : [])]), message: p.message });
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(source, withLines(doc, counter, problems));
  return { company: parsed.data, input: expanded };
}

export function loadConfigFile(path: string, env: Record<string, string | undefined> = process.env): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(path, [{ path: "", message: `cannot read file: ${(err as Error).message}` }]);
  }
  return parseConfig(text, path, env);
}
