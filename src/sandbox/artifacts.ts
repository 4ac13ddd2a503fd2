// A finished coding run's artifacts as files: its diff and its output, each one object in
// the fleet's file store, named by a file row where the work came from — on the work item
// itself, or on a message the seat posts in the run's thread. Every id and op id is
// derived from the run, so a report run again (its holder died) stores and names the same
// two files once. The bytes are the record's (its bounded diff and output tail).
import { createHash } from "node:crypto";
import type { Logger } from "../log.ts";
import { conversationTarget } from "../agent/conversation-post.ts";
import type { EstatePort } from "../agent/tools/estate-port.ts";
import type { BodyOf, FileAttach } from "../estate/records.ts";
import type { FileStore } from "../objects/store.ts";
import type { RunRecord } from "./runs.ts";

export interface ArtifactsPorts {
  files: Pick<FileStore, "put">;
  estate: EstatePort;
  log: Logger;
}

/** How the seat's message carrying a run's files begins: a note about the run, not an answer. */
export const ARTIFACTS_POST_PREFIX = "📎 ";

interface Artifact {
  kind: "diff" | "output";
  name: string;
  content_type: string;
  text: string;
}

/** The run's artifacts worth keeping: what it changed and what it printed. Pure. */
export function runArtifacts(rec: RunRecord): Artifact[] {
  const r = rec.result;
  if (!r) return [];
  const out: Artifact[] = [];
  if (r.diff !== "") out.push({ kind: "diff", name: `run-${rec.id}.diff`, content_type: "text/x-diff; charset=utf-8", text: r.diff });
  if (r.output_tail !== "") out.push({ kind: "output", name: `run-${rec.id}.log`, content_type: "text/plain; charset=utf-8", text: r.output_tail });
  return out;
}

/** The object key of one artifact: derived, so a second report stores over the first. Pure. */
export function artifactFileId(run_id: string, kind: Artifact["kind"]): string {
  return `fl-${createHash("sha256").update(`run:${run_id}:${kind}`).digest("hex").slice(0, 24)}`;
}

/** The owner the files hang on: the work item, or the seat's message in the run's thread. */
async function ownerFor(p: ArtifactsPorts, rec: RunRecord): Promise<{ domain: "tracker" | "chat"; on: FileAttach["on"] } | null> {
  const target = conversationTarget(rec.conversation);
  if (!target) return null;
  if (target.kind === "work") return { domain: "tracker", on: { work: target.key } };
  // The post's op id is its message id (estate/apply.ts chat.post).
  const op_id = `run-${rec.id}-files`;
  const out = await p.estate.write(
    "chat",
    { op: "chat.post", channel: target.channel, author: rec.seat, body: `${ARTIFACTS_POST_PREFIX}Coding run ${rec.id}: its diff and output, as files.`, thread_parent: target.root, mentions: [], dm: null },
    { op_id },
  );
  if (out.status !== "applied" || !out.outcome.ok) return null;
  return { domain: "chat", on: { message: op_id } };
}

/**
 * Stores the run's artifacts and names them. Never throws: a report must reach the seat
 * whatever became of its files (logged as sandbox_run_artifacts_failed).
 */
export async function storeRunArtifacts(p: ArtifactsPorts, rec: RunRecord): Promise<string[]> {
  const artifacts = runArtifacts(rec);
  if (artifacts.length === 0) return [];
  try {
    const owner = await ownerFor(p, rec);
    if (!owner) {
      p.log.warn("sandbox_run_artifacts_unplaced", { seat: rec.seat, run: rec.id, conversation: rec.conversation });
      return [];
    }
    const named: string[] = [];
    for (const a of artifacts) {
      const id = artifactFileId(rec.id, a.kind);
      const stored = await p.files.put(id, new TextEncoder().encode(a.text), { name: a.name, content_type: a.content_type });
      // The owner's shape is its domain's (records.ts): the record gate checks it again.
      const body = { op: "file.attach", file: id, name: a.name, content_type: a.content_type, size: stored.size, sha256: stored.sha256, by: rec.seat, on: owner.on } as BodyOf<"tracker" | "chat">;
      const out = await p.estate.write(owner.domain, body, { op_id: `run-${rec.id}-file-${a.kind}` });
      if (out.status === "applied" && out.outcome.ok) named.push(id);
    }
    p.log.info("sandbox_run_artifacts_stored", { seat: rec.seat, run: rec.id, files: named });
    return named;
  } catch (err) {
    p.log.warn("sandbox_run_artifacts_failed", { seat: rec.seat, run: rec.id, error: err as Error });
    return [];
  }
}
