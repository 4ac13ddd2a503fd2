// A JSON Schema of crewlet.yaml, generated from the zod schema (one source of truth), so
// editors can complete and check the file.
import { z } from "zod";
import { tierASchema } from "./tier-a.ts";

export function tierAJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(tierASchema, { io: "input", unrepresentable: "any", target: "draft-2020-12" });
  return { ...schema, title: "Crewlet node configuration (crewlet.yaml)" };
}
