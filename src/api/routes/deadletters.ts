// Dead letters: GET /deadletters (state:read) lists the newest; GET /deadletters/{id} shows
// one; POST /deadletters/{id}/replay puts one back on its mailbox's subject (as a fresh
// message, its delivery count starting again) and removes it; DELETE /deadletters/{id}
// removes it (both fleet:operate). The id is the message's sequence in CREWLET_DLQ.
import { Hono } from "hono";
import { z } from "zod";
import type { DeadLetter, Queue } from "../../queue/contract.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoBody, parseNoQuery } from "../errors.ts";

export type DeadLetterSource = Pick<Queue, "deadLetters" | "deadLetter" | "replayDeadLetter" | "deleteDeadLetter">;

const idParam = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

function parseId(raw: string): number {
  const parsed = idParam.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, "invalid_input", `params.id: a dead letter id is a positive integer (its DLQ sequence)`, "id");
  return parsed.data;
}

/** A dead letter as JSON: its body as text when it is UTF-8, else base64. */
export function describeDeadLetter(dl: DeadLetter) {
  let data: string;
  let encoding: "utf8" | "base64";
  try {
    data = new TextDecoder("utf-8", { fatal: true }).decode(dl.data);
    encoding = "utf8";
  } catch {
    data = Buffer.from(dl.data).toString("base64");
    encoding = "base64";
  }
  return {
    id: dl.id,
    subject: dl.subject,
    original_subject: dl.originalSubject,
    group: dl.group,
    reason: dl.reason,
    deliveries: dl.deliveryCount,
    headers: dl.headers,
    data,
    data_encoding: encoding,
  };
}

export function deadLettersGroup(src: DeadLetterSource): RouteGroup {
  return {
    prefix: "/deadletters",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const all = await src.deadLetters();
        return c.json({ dead_letters: all.map(describeDeadLetter) });
      });
      app.get("/:id", auth.require("state:read"), async (c) => {
        const id = parseId(c.req.param("id"));
        parseNoQuery(c);
        const dl = await src.deadLetter(id);
        if (!dl) throw new ApiError(404, "unknown_dead_letter", `no dead letter ${id}`, "id");
        return c.json(describeDeadLetter(dl));
      });
      app.post("/:id/replay", auth.require("fleet:operate"), async (c) => {
        const id = parseId(c.req.param("id"));
        parseNoQuery(c);
        await parseNoBody(c);
        const out = await src.replayDeadLetter(id);
        if (!out) throw new ApiError(404, "unknown_dead_letter", `no dead letter ${id}`, "id");
        return c.json({ replayed: true, id, seq: out.seq, duplicate: out.duplicate });
      });
      app.delete("/:id", auth.require("fleet:operate"), async (c) => {
        const id = parseId(c.req.param("id"));
        parseNoQuery(c);
        await parseNoBody(c);
        if (!(await src.deleteDeadLetter(id))) throw new ApiError(404, "unknown_dead_letter", `no dead letter ${id}`, "id");
        return c.json({ deleted: true, id });
      });
      return app;
    },
  };
}
