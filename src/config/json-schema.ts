// A JSON Schema of crewlet.yaml, generated from the zod schema (one source of truth), so
// editors can complete and check the file.
//
// The file is checked before ${VAR} expansion (an editor sees what is written), so every
// constrained field also takes a reference: a string with a pattern, enum or length
// limit accepts any string holding a ${VAR}, and a number or boolean accepts a plain
// `${VAR}` (which the loader types as the value would be written: see expandEnv).
import { z } from "zod";
import { tierASchema } from "./tier-a.ts";

const REF = "\\$\\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\\}";
const HOLDS_REFERENCE = { type: "string", pattern: REF, description: "a ${VAR} reference, expanded from the environment at load" };
const IS_REFERENCE = { type: "string", pattern: `^${REF}$`, description: "a ${VAR} reference, expanded from the environment at load" };

type Json = Record<string, unknown>;

const STRING_LIMITS = ["pattern", "enum", "format", "minLength", "maxLength"];
/** Keys holding one subschema / a map of them / a list of them (propertyNames is left alone: keys are never expanded). */
const ONE = ["items", "additionalProperties", "not"];
const MAP = ["properties", "$defs", "definitions"];
const LIST = ["anyOf", "oneOf", "allOf", "prefixItems"];

function acceptReferences(node: unknown): unknown {
  if (!node || typeof node !== "object" || Array.isArray(node)) return node;
  const s: Json = { ...(node as Json) };
  for (const k of ONE) if (s[k] && typeof s[k] === "object") s[k] = acceptReferences(s[k]);
  for (const k of MAP) if (s[k] && typeof s[k] === "object") s[k] = Object.fromEntries(Object.entries(s[k] as Json).map(([n, v]) => [n, acceptReferences(v)]));
  for (const k of LIST) if (Array.isArray(s[k])) s[k] = (s[k] as unknown[]).map(acceptReferences);
  const type = s.type;
  const constrainedString = type === "string" && STRING_LIMITS.some((k) => k in s);
  const scalar = type === "integer" || type === "number" || type === "boolean";
  if (!constrainedString && !scalar) return s;
  // The annotations stay on the outside, where an editor shows them.
  const { description, default: dflt, title, ...rest } = s;
  return {
    ...(title !== undefined ? { title } : {}),
    ...(description !== undefined ? { description } : {}),
    ...(dflt !== undefined ? { default: dflt } : {}),
    anyOf: [rest, scalar ? IS_REFERENCE : HOLDS_REFERENCE],
  };
}

export function tierAJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(tierASchema, { io: "input", unrepresentable: "any", target: "draft-2020-12" });
  return { ...(acceptReferences(schema) as Json), title: "Crewlet node configuration (crewlet.yaml)" };
}
