// Loading a Tier A file: YAML → ${VAR} expansion → zod → topology rules. Every problem is
// reported as {path, message} with the YAML line when the path exists in the file, and
// nothing is half-applied: a file is either all valid or refused.
import { readFileSync } from "node:fs";
import { isMap, isSeq, LineCounter, parseDocument, type Document } from "yaml";
import type { z } from "zod";
import { tierASchema, DEFAULT_NODE_ID, type TierA } from "./tier-a.ts";
import { companySchema, type Company } from "./company.ts";
import { topologyProblems, type ConfigProblem } from "./topology.ts";

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

const VAR_RE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Expands ${VAR} and ${VAR:-default} in every string value; a missing variable is a problem. */
export function expandEnv(value: unknown, env: Record<string, string | undefined>, path: string[], problems: ConfigProblem[]): unknown {
  if (typeof value === "string") {
    return value.replace(VAR_RE, (_all, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined && v !== "") return v;
      if (fallback !== undefined) return fallback;
      problems.push({ path: formatPath(path), message: `environment variable ${name} is not set` });
      return "";
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, [...path, String(i)], problems));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expandEnv(v, env, [...path, k], problems)]));
  }
  return value;
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

function zodProblems(err: z.ZodError): ConfigProblem[] {
  return err.issues.map((i) => {
    let message = i.message;
    if (i.code === "unrecognized_keys") message = `unknown key${i.keys.length > 1 ? "s" : ""} ${i.keys.map((k) => `"${k}"`).join(", ")}`;
    return { path: formatPath(i.path), message };
  });
}

/** Parses Tier A text. Throws ConfigError listing every problem. */
export function parseConfig(text: string, source = "crewlet.yaml", env: Record<string, string | undefined> = process.env): LoadedConfig {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => ({ path: "", message: `YAML: ${e.message.split("\n")[0]}${e.linePos ? ` (line ${e.linePos[0].line})` : ""}` })),
    );
  }
  const raw = doc.toJS() ?? {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(source, [{ path: "", message: "expected a mapping at the top level" }]);
  const problems: ConfigProblem[] = [];
  const expanded = expandEnv(raw, env, [], problems);
  const parsed = tierASchema.safeParse(expanded);
  if (!parsed.success) problems.push(...zodProblems(parsed.error));
  else problems.push(...topologyProblems(parsed.data));
  if (problems.length > 0 || !parsed.success) {
    const withLines = problems.map((p) => {
      const line = p.path ? lineOf(doc, counter, p.path.split(/\.|\[|\]/).filter(Boolean)) : undefined;
      return line ? { ...p, message: `${p.message} (line ${line})` } : p;
    });
    throw new ConfigError(source, withLines);
  }
  return { config: parsed.data, nodeId: parsed.data.node.id ?? DEFAULT_NODE_ID, source };
}

/**
 * A company on its own, for `crewlet config apply`: a crewlet.yaml (its `company:` is
 * taken) or a file holding just the company. ${VAR} expands as in Tier A; every problem is
 * named with its path and line, as for a node's own file.
 */
export function parseCompanyText(text: string, source: string, env: Record<string, string | undefined> = process.env): Company {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => ({ path: "", message: `YAML: ${e.message.split("\n")[0]}${e.linePos ? ` (line ${e.linePos[0].line})` : ""}` })),
    );
  }
  const raw = doc.toJS() ?? {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(source, [{ path: "", message: "expected a mapping at the top level" }]);
  const wrapped = "company" in raw;
  const prefix = wrapped ? ["company"] : [];
  const problems: ConfigProblem[] = [];
  const expanded = expandEnv(wrapped ? (raw as { company: unknown }).company : raw, env, prefix, problems);
  const parsed = companySchema.safeParse(expanded);
  if (!parsed.success) {
    for (const p of zodProblems(parsed.error)) problems.push({ path: formatPath([...prefix, ...(p.path ? p.path.split(/\.|\[|\]/).filter(Boolean) : [])]), message: p.message });
  }
  if (problems.length > 0 || !parsed.success) {
    throw new ConfigError(
      source,
      problems.map((p) => {
        const line = p.path ? lineOf(doc, counter, p.path.split(/\.|\[|\]/).filter(Boolean)) : undefined;
        return line ? { ...p, message: `${p.message} (line ${line})` } : p;
      }),
    );
  }
  return parsed.data;
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
