// The Tool contract (ARCHITECTURE.md § Contracts): a name, a zod input schema (sent to the
// model as JSON Schema), annotations, and a handler. Annotations are what a broken turn is
// judged by (spec: Seat Ownership § "A turn that broke halfway"): a call counts as having
// reached outside the engine only when it is MCP-backed and not positively read-only, when
// the tool says it is open-world, or when it writes to the estate. A tool nobody
// classified proves nothing.
import { z } from "zod";
import type { ToolSpec } from "../providers/contract.ts";

export interface ToolAnnotations {
  /** Positively read-only: it changes nothing anywhere. */
  readOnly: boolean;
  /** It acts on something beyond the estate (a colleague's inbox, a remote system). */
  openWorld: boolean;
  /** It writes to the estate (tracker, pages, chat) through the router. */
  estateWrite: boolean;
  /** Where it comes from: the engine's own built-ins or a seat's MCP child. */
  source: "builtin" | "mcp";
}

export interface ToolContext {
  /** The seat the turn runs for: the actor of every write. */
  seat: string;
  epoch: number;
  turn_id: string;
  signal: AbortSignal;
  /** The conversation the turn continues (its last trigger's), e.g. where a wake came from. */
  conversation?: string;
  /** Who caused the turn (its last trigger's `from`): whom a started run's result is for. */
  from?: string;
  /** The event id of the trigger the turn answers (its last): the same when the turn runs
   *  again after its holder died, so a call keyed on it is the same call both times. */
  cause?: string;
}

export interface ToolResult {
  /** What the model reads back (JSON text for structured answers). */
  content: string;
  is_error: boolean;
  /**
   * Whether this call reached outside the engine. Left undefined, the annotations decide;
   * a handler that can prove its write never left (the router refused it, nobody
   * answered) says false, and one that knows it landed says true.
   */
  reached?: boolean;
  /** The store refused the write for good (an invalid record, a rule it breaks): the same
   *  write sent again is refused again. Unset for a write nobody answered. */
  refused?: boolean;
}

export interface Tool {
  name: string;
  description: string;
  /** JSON Schema of the arguments (what the model is shown). */
  input_schema: Record<string, unknown>;
  annotations: ToolAnnotations;
  /** Validates `args` and runs. Throws only on a defect; a failure the model should see is is_error. */
  call(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult>;
}

/** Names a model API accepts for a function (OpenAI's and Anthropic's common subset). */
export const TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

/** A built-in tool from a zod schema: arguments are parsed, a bad one names its field. */
export function defineTool<S extends z.ZodType<Record<string, unknown>>>(def: {
  name: string;
  description: string;
  input: S;
  annotations: Omit<ToolAnnotations, "source">;
  run: (args: z.output<S>, ctx: ToolContext) => Promise<ToolResult>;
}): Tool {
  if (!TOOL_NAME_RE.test(def.name)) throw new Error(`tool name ${JSON.stringify(def.name)} is not a valid function name`);
  const schema = z.toJSONSchema(def.input, { target: "draft-7", unrepresentable: "any", io: "input" }) as Record<string, unknown>;
  delete schema.$schema;
  return {
    name: def.name,
    description: def.description,
    input_schema: schema,
    annotations: { ...def.annotations, source: "builtin" },
    async call(args, ctx) {
      const parsed = def.input.safeParse(args);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        return { content: `invalid arguments: ${issue?.path.join(".") || "(arguments)"}: ${issue?.message ?? "invalid"}`, is_error: true, reached: false };
      }
      return def.run(parsed.data, ctx);
    },
  };
}

export function toolSpec(t: Tool): ToolSpec {
  return { name: t.name, description: t.description, input_schema: t.input_schema };
}

/**
 * Whether a call of this tool counts as reaching outside the engine, by its annotations
 * alone. Pure; the spec's narrow proof: MCP and not positively read-only, open-world, or
 * an estate write.
 */
export function reachesOutside(a: ToolAnnotations): boolean {
  if (a.openWorld) return true;
  if (a.estateWrite) return true;
  return a.source === "mcp" && !a.readOnly;
}

export function ok(value: unknown): ToolResult {
  return { content: typeof value === "string" ? value : JSON.stringify(value), is_error: false };
}

export function fail(message: string, reached = false): ToolResult {
  return { content: message, is_error: true, reached };
}
