// The source's import graph, measured from the code: folders, the arrows between them, file
// import circles, arrows that run back up the layers, and the largest files.
// Run: bun scripts/import-graph.ts [--arrows]   (exit 1 when there is a circle or a back-up arrow)
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const SRC = join(ROOT, "src");

// The layers, bottom first: a file may import from its own layer or any layer below it.
// Folders not named here are an error, so a new folder must be placed on purpose.
const LAYERS: readonly (readonly string[])[] = [
  ["src", "metrics"], // clock, log, version, in-flight; counters
  ["queue", "coord", "config", "broker", "objects"], // the two shared-state contracts; the schemas; the sidecar; the object store
  ["estate", "memory", "seat", "org"], // the company's records; seat memory; the seat host; the org model
  ["agent/providers", "agent/tools"], // model providers; the agent's tools
  ["agent"], // the turn engine
  ["sandbox", "spend", "approvals"], // coding runs; spend caps and alerts; calls parked for a yes (all drive turns)
  ["duty"], // the singleton duties
  ["api/dashboard/client", "api/dashboard", "api/routes", "api", "integrations"], // HTTP: routes, auth, webhooks in
  ["node"], // the composition root
  ["cli", "src/main.ts"], // the commands
];

const rank = new Map<string, number>();
LAYERS.forEach((layer, i) => layer.forEach((f) => rank.set(f, i)));

function walk(dir: string, out: string[]): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.tsx?$/.test(name)) out.push(p);
  }
  return out;
}

/** A file's folder relative to src ("src" for the root files; main.ts is its own top). */
function folderOf(file: string): string {
  const rel = relative(SRC, file);
  if (rel === "main.ts") return "src/main.ts";
  const d = dirname(rel);
  return d === "." ? "src" : d;
}

const files = walk(SRC, []).sort();
const IMPORT = /(?:^|[^.\w])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s*)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/gm;
const edges = new Map<string, Set<string>>();
for (const f of files) {
  const text = readFileSync(f, "utf8");
  const out = new Set<string>();
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2];
    if (spec === undefined || !spec.startsWith(".")) continue;
    const target = resolve(dirname(f), spec);
    if (files.includes(target)) out.add(target);
  }
  edges.set(f, out);
}

// Folder arrows.
const arrows = new Map<string, number>();
const backUp: string[] = [];
const unplaced = new Set<string>();
for (const [from, tos] of edges) {
  for (const to of tos) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (a === b) continue;
    const key = `${a} -> ${b}`;
    arrows.set(key, (arrows.get(key) ?? 0) + 1);
    const ra = rank.get(a);
    const rb = rank.get(b);
    if (ra === undefined) unplaced.add(a);
    if (rb === undefined) unplaced.add(b);
    if (ra !== undefined && rb !== undefined && rb > ra) {
      backUp.push(`${relative(ROOT, from)} -> ${relative(ROOT, to)}  (${a} imports ${b})`);
    }
  }
}

// File circles: strongly connected components of more than one file (Tarjan).
const index = new Map<string, number>();
const low = new Map<string, number>();
const onStack = new Set<string>();
const stack: string[] = [];
const circles: string[][] = [];
let counter = 0;
function strong(v: string): void {
  index.set(v, counter);
  low.set(v, counter);
  counter += 1;
  stack.push(v);
  onStack.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!index.has(w)) {
      strong(w);
      low.set(v, Math.min(low.get(v)!, low.get(w)!));
    } else if (onStack.has(w)) {
      low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
  }
  if (low.get(v) === index.get(v)) {
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(relative(ROOT, w));
    } while (w !== v);
    if (component.length > 1) circles.push(component.sort());
  }
}
for (const f of files) if (!index.has(f)) strong(f);

const sizes = files
  .map((f) => ({ file: relative(ROOT, f), lines: readFileSync(f, "utf8").split("\n").length - 1 }))
  .sort((x, y) => y.lines - x.lines);

const folders = new Set(files.map(folderOf));
folders.delete("src/main.ts");
console.log(`folders: ${folders.size}  (with files: ${[...folders].sort().join(", ")})`);
console.log(`files: ${files.length}`);
console.log(`folder arrows: ${arrows.size}  (file imports across folders: ${[...arrows.values()].reduce((s, n) => s + n, 0)})`);
console.log(`circles: ${circles.length}`);
for (const c of circles) console.log(`  ${c.join(" ⇄ ")}`);
console.log(`back-up arrows: ${backUp.length}`);
for (const b of backUp.sort()) console.log(`  ${b}`);
if (unplaced.size > 0) console.log(`folders with no layer: ${[...unplaced].join(", ")}`);
console.log("largest files:");
for (const s of sizes.slice(0, 8)) console.log(`  ${String(s.lines).padStart(5)}  ${s.file}`);
if (process.argv.includes("--arrows")) {
  console.log("arrows:");
  for (const [k, n] of [...arrows].sort()) console.log(`  ${k}  (${n})`);
}
process.exitCode = circles.length > 0 || backUp.length > 0 || unplaced.size > 0 ? 1 : 0;
