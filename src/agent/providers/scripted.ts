// The scripted provider: deterministic and offline, driven by rules in the company file.
// The first rule whose `when` matches the turn (trigger type, a regular expression on the
// trigger's text, the seat) answers: its tool calls first, with {{templated}} arguments,
// then — once their results are in — its reply text. The default company runs on it, so a
// new user sees agents working with no API key, and tests get a model that never varies.
import type { ProviderConfig } from "../../config/company.ts";
import { compilePattern } from "../../config/pattern.ts";
import { ProviderError, type Completion, type CompletionRequest, type Provider, type ToolCall, type TurnFacts } from "./contract.ts";

export type ScriptedConfig = Extract<ProviderConfig, { type: "scripted" }>;
export type ScriptedRule = ScriptedConfig["rules"][number];

/** Template nesting walked in tool arguments; a config is never this deep on purpose. */
const MAX_ARG_DEPTH = 8;

interface CompiledRule {
  rule: ScriptedRule;
  text: RegExp | null;
}

// One compiler for the config check and the provider (src/config/pattern.ts).
export { compilePattern };

export function compileRules(name: string, rules: readonly ScriptedRule[]): CompiledRule[] {
  return rules.map((rule, i) => {
    if (rule.when.text === undefined) return { rule, text: null };
    try {
      return { rule, text: compilePattern(rule.when.text) };
    } catch (err) {
      throw new ProviderError(name, "config", `rules[${i}].when.text is not a valid regular expression: ${(err as Error).message}`);
    }
  });
}

/** The index of the first rule matching the turn, or null. Pure. */
export function matchRule(rules: readonly CompiledRule[], facts: TurnFacts | undefined): number | null {
  const type = facts?.trigger_type ?? "";
  const seat = facts?.seat ?? "";
  const text = facts?.vars.text ?? "";
  for (let i = 0; i < rules.length; i++) {
    const { rule, text: re } = rules[i]!;
    if (rule.when.trigger !== undefined && rule.when.trigger !== type) continue;
    if (rule.when.seat !== undefined && rule.when.seat !== seat) continue;
    if (re !== null && !re.test(text)) continue;
    return i;
  }
  return null;
}

/** Replaces {{name}} with vars[name]; an unknown name renders empty (a rule is not an error). */
export function renderTemplate(template: string, vars: Readonly<Record<string, string>>): string {
  return template.replace(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g, (_, name: string) => vars[name] ?? "");
}

export function renderArgs(value: unknown, vars: Readonly<Record<string, string>>, depth = 0): unknown {
  if (typeof value === "string") return renderTemplate(value, vars);
  if (depth >= MAX_ARG_DEPTH || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => renderArgs(v, vars, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderArgs(v, vars, depth + 1)]));
}

export function scriptedProvider(name: string, config: Pick<ScriptedConfig, "rules">): Provider {
  const rules = compileRules(name, config.rules);
  return {
    name,
    async complete(req: CompletionRequest): Promise<Completion> {
      if (req.signal?.aborted) throw new ProviderError(name, "aborted", "cancelled by the caller");
      const vars = req.facts?.vars ?? {};
      const i = matchRule(rules, req.facts);
      const usage = { input_tokens: 0, output_tokens: 0 };
      if (i === null) return { text: "", toolCalls: [], usage };
      const rule = rules[i]!.rule;
      // The rule's calls go out in the turn's first round; every later round (their
      // results are in) answers with the reply, which ends the turn.
      const firstRound = !req.messages.some((m) => m.role === "assistant");
      if (firstRound && rule.tool_calls.length > 0) {
        const toolCalls: ToolCall[] = rule.tool_calls.map((c, j) => {
          const args = renderArgs(c.args, vars) as Record<string, unknown>;
          return { id: `scripted_${i}_${j}`, name: c.tool, arguments: args, raw_arguments: JSON.stringify(args) };
        });
        return { text: "", toolCalls, usage };
      }
      return { text: renderTemplate(rule.reply, vars), toolCalls: [], usage };
    },
  };
}
