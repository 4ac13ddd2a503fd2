// One model call, timed: the provider's answer (or its error, rethrown) and a `model_called`
// log line with the provider, duration and outcome. The line is debug (a round is too
// frequent for the info log) but every line reaches the node's metrics (src/metrics), which
// is where provider calls, errors and latency are counted from.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { ProviderError, type Completion, type CompletionRequest, type Provider } from "./providers/contract.ts";

export async function callModel(provider: Provider, req: CompletionRequest, o: { clock: Clock; log: Logger; seat: string; round: number }): Promise<Completion> {
  const started = o.clock.now();
  try {
    const answer = await provider.complete(req);
    o.log.debug("model_called", { seat: o.seat, provider: provider.name, round: o.round, ok: true, duration_ms: o.clock.now() - started });
    return answer;
  } catch (err) {
    const kind = err instanceof ProviderError ? err.kind : "other";
    o.log.debug("model_called", { seat: o.seat, provider: provider.name, round: o.round, ok: false, error_kind: kind, duration_ms: o.clock.now() - started });
    throw err;
  }
}
