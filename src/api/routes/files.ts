// Files on work items, chat messages and pages: POST {owner}/files?name=, GET {owner}/files,
// GET {owner}/files/{id}. The bytes go to the object store before the row names them, so an
// upload whose row never landed is only an orphan for the object collector.
import { createHash, randomBytes } from "node:crypto";
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, coordCall, parseNoQuery, parseParam, parseQuery, readBodyBytes } from "../errors.ts";
import { callerActor, estateCall, writeReply } from "../estate-http.ts";
import type { FileOwner, FileRow } from "../../estate/attachments.ts";
import { containerKey, contentType, fileId, fileName, opId, pageTitle, workKey, type FileAttach } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import type { Domain } from "../../estate/schema.ts";
import type { Grant } from "../../config/tier-a.ts";
import { MAX_FILE_BYTES, type FileStore } from "../../objects/store.ts";

/** Shown inline (a preview): raster images and plain text, which run nothing in a browser.
 *  Everything else (HTML, SVG, PDF …) downloads, so an upload cannot script the dashboard. */
const INLINE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"]);
const DEFAULT_CONTENT_TYPE = "application/octet-stream";

// `name` is required, but judged after the owner: an unknown query parameter is named
// first, then an owner that names nothing, then a missing name.
const uploadQuery = z.strictObject({ name: fileName.optional() });

/** One kind of owner: its log, the grant its writes need, how its path reads and what it asks the estate. */
interface OwnerKind {
  path: string;
  domain: Domain;
  grant: Grant;
  owner(c: Context<AuthEnv>): FileOwner;
  /** Null when the owner exists, else the 404 naming the parameter that names nothing. */
  missing(router: EstateRouter, on: FileOwner): Promise<ApiError | null>;
  list(router: EstateRouter, on: FileOwner): Promise<FileRow[]>;
}

const work: OwnerKind = {
  path: "/work/:key/files",
  domain: "tracker",
  grant: "work:write",
  owner: (c) => ({ work: parseParam(workKey, c.req.param("key") ?? "", "key") }),
  missing: async (r, on) => {
    const key = (on as { work: string }).work;
    return (await r.read({ q: "work.get", key })) ? null : new ApiError(404, "unknown_work_item", `no work item ${key}`, "key");
  },
  list: (r, on) => r.read({ q: "work.files", key: (on as { work: string }).work }),
};

const message: OwnerKind = {
  path: "/chat/messages/:id/files",
  domain: "chat",
  grant: "chat:write",
  owner: (c) => ({ message: parseParam(opId, c.req.param("id") ?? "", "id") }),
  missing: async (r, on) => {
    const id = (on as { message: string }).message;
    return (await r.read({ q: "chat.message", id })) ? null : new ApiError(404, "unknown_message", `no message ${id}`, "id");
  },
  list: (r, on) => r.read({ q: "chat.files", message: (on as { message: string }).message }),
};

type PageOwner = { container: string; title: string };
const page: OwnerKind = {
  path: "/pages/:container/:title/files",
  domain: "pages",
  grant: "knowledge:write",
  owner: (c) => ({ container: parseParam(containerKey, c.req.param("container") ?? "", "container"), title: parseParam(pageTitle, c.req.param("title") ?? "", "title") }),
  missing: async (r, on) => {
    const p = on as PageOwner;
    if (await r.read({ q: "pages.get", ...p })) return null;
    // Name what is missing: the container, or the page in a container that exists.
    const known = await r.read({ q: "pages.containers" });
    if (!known.some((k) => k.key === p.container)) return new ApiError(404, "unknown_container", `no container ${p.container}`, "container");
    return new ApiError(404, "unknown_page", `no page "${p.title}" in ${p.container}`, "title");
  },
  list: (r, on) => r.read({ q: "pages.files", ...(on as PageOwner) }),
};

export const OWNER_KINDS: readonly OwnerKind[] = [work, message, page];

/** The uploaded body's content type, judged: absent is octet-stream; a malformed one is a 400 naming the header. */
function uploadType(c: Context<AuthEnv>): string {
  const raw = (c.req.header("content-type") ?? DEFAULT_CONTENT_TYPE).trim().toLowerCase().replace(/;\s*/g, "; ");
  const parsed = contentType.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, "invalid_input", `headers.content-type: ${parsed.error.issues[0]?.message}`, "content-type");
  return parsed.data;
}

/** The object key: derived from the request's op id when an Idempotency-Key names one, so a
 *  retried upload stores the same object under the same row; else fresh. */
function newFileId(op_id: string | undefined): string {
  const hex = op_id ? createHash("sha256").update(`file:${op_id}`).digest("hex") : randomBytes(12).toString("hex");
  return `fl-${hex.slice(0, 24)}`;
}

function tooLarge(): ApiError {
  return new ApiError(413, "too_large", `a file is at most ${MAX_FILE_BYTES} bytes (${MAX_FILE_BYTES / 1024 / 1024} MiB): an upload is held in memory whole while it is stored`, "body");
}

function attachBody(on: FileOwner, f: Omit<FileAttach, "op" | "on">): FileAttach {
  // The owner's shape is the kind's own (its schema in records.ts): checked by the record gate.
  return { op: "file.attach", ...f, on } as FileAttach;
}

function storeOf(files: FileStore | null): FileStore {
  if (!files) throw new ApiError(503, "files_unavailable", "this node has no access to the fleet's file store");
  return files;
}

async function download(c: Context<AuthEnv>, files: FileStore, row: FileRow): Promise<Response> {
  const got = await coordCall("files", () => files.get(row.id));
  if (!got) throw new ApiError(404, "file_missing", `file ${row.id} is named on this owner but is not in the fleet's file store`, "file");
  const disposition = INLINE_TYPES.has(row.content_type.split(";")[0]!) ? "inline" : "attachment";
  return new Response(got.data, {
    status: 200,
    headers: {
      "content-type": row.content_type,
      "content-length": String(got.size),
      "content-disposition": `${disposition}; filename*=UTF-8''${encodeURIComponent(row.name)}`,
      "x-content-type-options": "nosniff",
      // Whatever the bytes are, they run nothing on this origin.
      "content-security-policy": "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
      "cache-control": "private, max-age=0",
    },
  });
}

async function ownerExists(kind: OwnerKind, router: EstateRouter, on: FileOwner): Promise<void> {
  const missing = await estateCall(() => kind.missing(router, on));
  if (missing) throw missing;
}

/**
 * The lease protocol that brought `file.attach` rows (coord/contract.ts): a build below it
 * cannot decode one. Not LEASE_PROTOCOL, which later changes raise for their own reasons.
 */
export const FILE_ROWS_PROTOCOL = 7;

/**
 * An upload is refused while a node of a build below FILE_ROWS_PROTOCOL is live: its copy
 * could not decode the file's row and would hold the whole domain.
 */
async function refuseBeside(olderBuild: (() => Promise<number | null>) | undefined): Promise<void> {
  const floor = olderBuild ? await coordCall("the lease protocol floor", olderBuild) : null;
  if (floor !== null && floor < FILE_ROWS_PROTOCOL) {
    throw new ApiError(503, "files_unavailable", `a node of an older build (lease protocol ${floor}) is live and could not read a file's row; files can be attached once every node runs protocol ${FILE_ROWS_PROTOCOL} or later`);
  }
}

export interface FileRoutesOptions {
  router: EstateRouter;
  files: FileStore | null;
  /** The lowest lease protocol among live nodes (coord.leases.protocolFloor), or none to judge. */
  protocolFloor?: () => Promise<number | null>;
}

export function fileRoutes(o: FileRoutesOptions): RouteGroup {
  const { router } = o;
  return {
    prefix: "/",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      for (const kind of OWNER_KINDS) {
        app.post(kind.path, auth.require(kind.grant), async (c) => {
          const on = kind.owner(c);
          const { name } = parseQuery(c, uploadQuery);
          await ownerExists(kind, router, on);
          if (name === undefined) throw new ApiError(400, "invalid_input", "query.name: the file's name is required (?name=report.pdf)", "name");
          const content_type = uploadType(c);
          const files = storeOf(o.files);
          await refuseBeside(o.protocolFloor);
          const bytes = await readBodyBytes(c, MAX_FILE_BYTES, tooLarge);
          const id = newFileId(c.get("op_id"));
          // A store that does not answer is a 503 to retry (under the same Idempotency-Key, the same object).
          const stored = await coordCall("files", () => files.put(id, bytes, { name, content_type }));
          const body = attachBody(on, { file: id, name, content_type, size: stored.size, sha256: stored.sha256, by: callerActor(c) });
          const out = await estateCall(() => router.write(kind.domain, body, { op_id: c.get("op_id") }));
          return writeReply(c, out);
        });
        app.get(kind.path, auth.require("state:read"), async (c) => {
          const on = kind.owner(c);
          parseNoQuery(c);
          await ownerExists(kind, router, on);
          return c.json({ files: await estateCall(() => kind.list(router, on)) });
        });
        app.get(`${kind.path}/:file`, auth.require("state:read"), async (c) => {
          const on = kind.owner(c);
          const id = parseParam(fileId, c.req.param("file") ?? "", "file");
          parseNoQuery(c);
          await ownerExists(kind, router, on);
          const row = (await estateCall(() => kind.list(router, on))).find((f) => f.id === id);
          if (!row) throw new ApiError(404, "unknown_file", `no file ${id} on this ${kind.domain === "tracker" ? "work item" : kind.domain === "chat" ? "message" : "page"}`, "file");
          return download(c, storeOf(o.files), row);
        });
      }
      return app;
    },
  };
}
