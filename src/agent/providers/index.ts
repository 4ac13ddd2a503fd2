// Builds the company's providers from providers.llm, wiring each `fallback` (another key)
// behind the one that names it. A call falls back only when the primary gave up for a
// reason another endpoint could fix (it is down, slow, rate-limited, rejected the key or
// lacks the model: failure.ts worthFallback); a caller's cancellation never falls through.
import type { Clock } from "../../clock.ts";
import type { ProviderConfig } from "../../config/company.ts";
import type { Logger } from "../../log.ts";
import { anthropicProvider } from "./anthropic.ts";
import { ProviderError, type Completion, type CompletionRequest, type KeyCooldowns, type Provider } from "./contract.ts";
import { worthFallback } from "./failure.ts";
import { CONNECT_TIMEOUT_MS, endpointUrl, probeConnect, type Timeouts } from "./http.ts";
import { openAiProvider } from "./openai.ts";
import { redactor, type Redact } from "./redact.ts";
import { scriptedProvider } from "./scripted.ts";

export * from "./contract.ts";

type HttpConfig = Extract<ProviderConfig, { type: "openai" | "anthropic" }>;

function timeoutsOf(cfg: HttpConfig): Partial<Timeouts> {
  const t: Partial<Timeouts> = {};
  if (cfg.connect_timeout_seconds !== undefined) t.connect_ms = cfg.connect_timeout_seconds * 1000;
  if (cfg.first_byte_timeout_seconds !== undefined) t.first_byte_ms = cfg.first_byte_timeout_seconds * 1000;
  if (cfg.idle_timeout_seconds !== undefined) t.idle_ms = cfg.idle_timeout_seconds * 1000;
  return t;
}

function buildOne(key: string, cfg: ProviderConfig, clock: Clock, redact: Redact, random?: () => number, cooldowns?: KeyCooldowns): Provider {
  switch (cfg.type) {
    case "openai":
    case "anthropic": {
      const common = {
        name: key,
        base_url: cfg.base_url,
        model: cfg.model,
        api_keys: cfg.api_keys,
        timeout_ms: cfg.timeout_seconds * 1000,
        timeouts: timeoutsOf(cfg),
        stream: cfg.stream,
        retry_budget_ms: cfg.retry_budget_seconds * 1000,
        redact,
        random,
        clock,
        cooldowns,
      };
      return cfg.type === "openai" ? openAiProvider(common) : anthropicProvider({ ...common, max_tokens: cfg.max_tokens });
    }
    case "scripted":
      return scriptedProvider(key, cfg);
  }
}

/** A provider that asks `fallback` when `primary` fails in a way another endpoint could fix. */
export function withFallback(primary: Provider, fallback: Provider): Provider {
  return {
    name: primary.name,
    async complete(req: CompletionRequest): Promise<Completion> {
      try {
        return await primary.complete({ ...req, has_fallback: true });
      } catch (err) {
        if (!(err instanceof ProviderError) || !worthFallback(err.failure, err.status)) throw err;
        return fallback.complete({ ...req, has_fallback: false });
      }
    },
  };
}

/** Every key and token in the providers' config: what a provider error must never show. */
export function providerSecrets(llm: Readonly<Record<string, ProviderConfig>>): string[] {
  return Object.values(llm).flatMap((p) => (p.type === "scripted" ? [] : p.api_keys));
}

export interface BuildOptions {
  /** Further secrets to keep out of provider errors (API tokens, webhook secrets). */
  secrets?: readonly string[];
  /** The backoff's jitter source (tests pin it; default Math.random). */
  random?: () => number;
  /** The fleet's shared key cooldowns: every provider skips a key another node saw 429 on. */
  cooldowns?: KeyCooldowns;
}

/**
 * Every provider under providers.llm, fallbacks wired. A fallback chain is followed at
 * most once per provider (the config schema already refuses unknown keys; a cycle here is
 * cut where it closes, so a call tries each endpoint at most once).
 */
export function buildProviders(llm: Readonly<Record<string, ProviderConfig>>, clock: Clock, opts: BuildOptions = {}): Map<string, Provider> {
  const redact = redactor([...providerSecrets(llm), ...(opts.secrets ?? [])]);
  const bare = new Map<string, Provider>();
  for (const [key, cfg] of Object.entries(llm)) bare.set(key, buildOne(key, cfg, clock, redact, opts.random, opts.cooldowns));
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

/**
 * At boot, each model endpoint is tried for a TCP connection once; one that is unreachable
 * or refusing is logged once with its name (`provider_unreachable`), so an operator sees a
 * wrong base_url before the first person is told. Never throws, never blocks the boot
 * beyond the connect timeout (all probed at once).
 */
export async function probeProviders(llm: Readonly<Record<string, ProviderConfig>>, clock: Clock, log: Logger): Promise<string[]> {
  const unreachable: string[] = [];
  await Promise.all(
    Object.entries(llm).map(async ([name, cfg]) => {
      if (cfg.type === "scripted") return;
      const url = endpointUrl(cfg.type, cfg.base_url);
      const connect_ms = cfg.connect_timeout_seconds !== undefined ? cfg.connect_timeout_seconds * 1000 : CONNECT_TIMEOUT_MS;
      try {
        await probeConnect(url, connect_ms, clock);
      } catch (err) {
        unreachable.push(name);
        log.warn("provider_unreachable", { provider: name, url: new URL(url).origin, error: (err as Error).message });
      }
    }),
  );
  return unreachable;
}
