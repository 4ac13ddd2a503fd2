// What changed between two company revisions, as a person reads it: one line per field
// that was added, removed or changed, addressed by a path such as `roles[cto].goal`. Lists
// of things with a handle, id or name (roles, units, schedules…) are matched by it rather
// than by position, so inserting a role shows as one role added, not every later role
// changed. Pure: table-tested under bun (test/api/company-diff.test.ts).

/** Paths reported at most: a wholesale rewrite is summarised, not listed in full. */
export const DIFF_LINES_MAX = 500;
/** How deep a company is walked: far deeper than the schema nests. */
const DEPTH_MAX = 32;

const KEYS = ["handle", "id", "name", "key"];

/** The field that names each element of `list`, when every element has a distinct one. */
function keyOf(list) {
  for (const k of KEYS) {
    const seen = new Set();
    let ok = list.length > 0;
    for (const v of list) {
      if (!v || typeof v !== "object" || Array.isArray(v) || (typeof v[k] !== "string" && typeof v[k] !== "number") || seen.has(v[k])) {
        ok = false;
        break;
      }
      seen.add(v[k]);
    }
    if (ok) return k;
  }
  return null;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function flatten(value, path, out, depth) {
  if (depth > DEPTH_MAX) {
    out.set(path, JSON.stringify(value));
    return;
  }
  if (Array.isArray(value)) {
    const k = keyOf(value);
    if (value.length === 0) out.set(path, "[]");
    value.forEach((v, i) => flatten(v, `${path}[${k ? v[k] : i}]`, out, depth + 1));
    return;
  }
  if (isObject(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) out.set(path, "{}");
    for (const [k, v] of entries) flatten(v, path ? `${path}.${k}` : k, out, depth + 1);
    return;
  }
  out.set(path, JSON.stringify(value));
}

/**
 * The differences from `before` to `after` (two company objects), in `after`'s order with
 * removals where they were: [{ path, kind: "added" | "removed" | "changed", before?, after? }],
 * values as JSON text. `truncated` is how many more there were past DIFF_LINES_MAX.
 */
export function companyDiff(before, after) {
  const a = new Map();
  const b = new Map();
  flatten(before, "", a, 0);
  flatten(after, "", b, 0);
  const lines = [];
  for (const [path, v] of a) if (!b.has(path)) lines.push({ path, kind: "removed", before: v });
  for (const [path, v] of b) {
    if (!a.has(path)) lines.push({ path, kind: "added", after: v });
    else if (a.get(path) !== v) lines.push({ path, kind: "changed", before: a.get(path), after: v });
  }
  lines.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
  return { lines: lines.slice(0, DIFF_LINES_MAX), truncated: Math.max(0, lines.length - DIFF_LINES_MAX) };
}
