// The turn engine's spend gate (turn.ts SpendGate) over the fleet's counters: a refusal in
// words the person reads (which cap, when it resets), every refusal and alert an event.
import type { EventSink } from "../agent/events.ts";
import type { SpendGate } from "../agent/turn.ts";
import type { Logger } from "../log.ts";
import { exhaustedWords, scopeName, type Usage } from "./budget.ts";
import { BudgetUnknown, type BudgetCounters } from "./counters.ts";

export class BudgetGate implements SpendGate {
  constructor(
    private readonly o: { counters: BudgetCounters; timezone: () => string; events: EventSink; log: Logger; node_id: string },
  ) {}

  async check(seat: string, provider: string): Promise<string | { unknown: string } | null> {
    let e;
    try {
      e = await this.o.counters.check(seat);
    } catch (err) {
      if (!(err instanceof BudgetUnknown)) throw err;
      this.o.events.emit("budget_unknown", { seat, node: this.o.node_id, provider, error: err.message });
      return { unknown: `my model budget cannot be read right now (${err.message}), and I start no model call I cannot account for; I will try again shortly` };
    }
    if (!e) return null;
    this.o.events.emit("budget_exhausted", {
      seat,
      node: this.o.node_id,
      provider,
      scope: scopeName(e.scope),
      window: e.window,
      limit: e.limit,
      cap: e.cap,
      spent_tokens: e.spent.input_tokens + e.spent.output_tokens,
      spent_money: e.spent.cost_micros / 1_000_000,
      reset_at: new Date(e.reset_at).toISOString(),
    });
    return exhaustedWords(e, this.o.timezone());
  }

  charge(seat: string, provider: string, usage: Usage): Promise<void> {
    return this.o.counters.charge(seat, provider, usage);
  }
}
