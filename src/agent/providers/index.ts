// Builds the company's providers from providers.llm, wiring each `fallback` (another key)
// behind the one that names it. A call falls back only when the primary gave up for a
// reason another endpoint could fix (it is down, slow, rate-limited, rejected the key);
// a caller's cancellation never falls through.
import type { Clock } from "../../clock.ts";
import type { ProviderConfig } from "../../config/company.ts";
import { anthropicProvider } from "./anthropic.ts";
import { ProviderError, type Completion, type CompletionRequest, type Provider } from "./contract.ts";
import { openAiProvider } from "./openai.ts";
import { scriptedProvider } from "./scripted.ts";

export * from "./contract.ts";

function buildOne(key: string, cfg: ProviderConfig, clock: Clock): Provider {
  switch (cfg.type) {
    case "openai":
      return openAiProvider({ name: key, base_url: cfg.base_url, model: cfg.model, api_keys: cfg.api_keys, timeout_ms: cfg.timeout_seconds * 1000, clock });
    case "anthropic":
      return anthropicProvider({
        name: key,
        base_url: cfg.base_url,
        model: cfg.model,
        api_keys: cfg.api_keys,
        max_tokens: cfg.max_tokens,
        timeout_ms: cfg.timeout_seconds * 1000,
        clock,
      });
    case "scripted":
      return scriptedProvider(key, cfg);
  }
}

/** A provider that asks `fallback` when `primary` fails with anything but a cancellation. */
export function withFallback(primary: Provider, fallback: Provider): Provider {
  return {
    name: primary.name,
    async complete(req: CompletionRequest): Promise<Completion> {
      try {
        return await primary.complete(req);
      } catch (err) {
        if (err instanceof ProviderError && (err.kind === "aborted" || err.kind === "bad_response")) throw err;
        if (!(err instanceof ProviderError)) throw err;
        return fallback.complete(req);
      }
    },
  };
}

/**
 * Every provider under providers.llm, fallbacks wired. A fallback chain is followed at
 * most once per provider (the config schema already refuses unknown keys; a cycle here is
 * cut where it closes, so a call tries each endpoint at most once).
 */
export function buildProviders(llm: Readonly<Record<string, ProviderConfig>>, clock: Clock): Map<string, Provider> {
  const bare = new Map<string, Provider>();
  for (const [key, cfg] of Object.entries(llm)) bare.set(key, buildOne(key, cfg, clock));
  const out = new Map<string, Provider>();
  for (const key of bare.keys()) {
    const chain: string[] = [key];
    let at = llm[key];
    while (at && at.type !== "scripted" && at.fallback !== undefined && !chain.includes(at.fallback) && bare.has(at.fallback)) {
      chain.push(at.fallback);
      at = llm[at.fallback];
    }
    let p = bare.get(chain[chain.length - 1]!)!;
    for (let i = chain.length - 2; i >= 0; i--) p = withFallback(bare.get(chain[i]!)!, p);
    out.set(key, p);
  }
  return out;
}
