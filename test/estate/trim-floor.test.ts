// The trim's floor rule as a table: facts in, decision out (src/estate/trim-floor.ts).
import { describe, expect, test } from "bun:test";
import { decideTrim, UNHEARD_COPY_HOLD_MS, type CopyFact, type TrimFacts } from "../../src/estate/trim-floor.ts";

const NOW = 10_000_000_000;
const live = (node: string, applied: number | null): CopyFact => ({ node, applied, live: true, heard_at: NOW });
const unheard = (node: string, applied: number | null, ago_ms: number): CopyFact => ({ node, applied, live: false, heard_at: NOW - ago_ms });

function facts(over: Partial<TrimFacts>): TrimFacts {
  return { domain: "chat", now_ms: NOW, log: { first_seq: 1, last_seq: 5_000 }, copies: [live("a", 5_000), live("b", 4_800)], hold: null, wake_ack_floor: null, margin: 100, ...over };
}

type Row = [string, Partial<TrimFacts>, { kind: string; floor?: number | null; purge_below?: number | null; holding?: string | null; reason?: RegExp; released?: string[] }];

const rows: Row[] = [
  ["the lowest live copy sets the floor, less the margin", {}, { kind: "purge", floor: 4_800, purge_below: 4_701, holding: "copy:b" }],
  ["the log already starts past what the floor permits", { log: { first_seq: 4_701, last_seq: 5_000 } }, { kind: "nothing", floor: 4_800, purge_below: null, reason: /permits nothing more/ }],
  ["a margin larger than the floor purges nothing", { margin: 10_000 }, { kind: "nothing", floor: 4_800 }],
  ["a copy below the log's start (repairing) holds everything", { log: { first_seq: 3_000, last_seq: 5_000 }, copies: [live("a", 5_000), live("n", 0)] }, { kind: "nothing", floor: 0, holding: "copy:n" }],
  ["an operator hold lowers the floor", { hold: { position: 1_000, by: "tok-ops", at: NOW - 5, reason: "backup" } }, { kind: "purge", floor: 1_000, purge_below: 901, holding: "hold" }],
  ["a hold above every copy changes nothing", { hold: { position: 4_900, by: "tok-ops", at: NOW, reason: null } }, { kind: "purge", floor: 4_800, holding: "copy:b" }],
  ["the wake feed's unsettled records are kept", { wake_ack_floor: 2_000 }, { kind: "purge", floor: 2_000, purge_below: 1_901, holding: "wake_feed" }],
  ["a copy unheard from holds the log at its last position", { copies: [live("a", 5_000), unheard("c", 3_000, 60_000)] }, { kind: "purge", floor: 3_000, holding: "copy:c" }],
  ["a copy unheard from past the hold is let go (it repairs by snapshot)", { copies: [live("a", 5_000), unheard("c", 3_000, UNHEARD_COPY_HOLD_MS)] }, { kind: "purge", floor: 5_000, holding: "copy:a", released: ["c"] }],
  ["a copy unheard from whose position was never heard stops the trim", { copies: [live("a", 5_000), unheard("c", null, 1_000)] }, { kind: "skip", reason: /unheard from and its last position is not known/ }],
  ["a live copy that does not publish its position stops the trim", { copies: [live("a", 5_000), live("old", null)] }, { kind: "skip", reason: /old does not publish/ }],
  ["no live copy: nobody vouches for the history", { copies: [unheard("a", 5_000, 1_000)] }, { kind: "skip", reason: /no live data node/ }],
  ["no copies known at all", { copies: [] }, { kind: "skip", reason: /no live data node/ }],
  ["the log did not answer", { log: null }, { kind: "skip", reason: /log did not answer/ }],
  ["presence unreadable", { copies: null }, { kind: "skip", reason: /could not be read/ }],
  ["hold unreadable", { hold: "unknown" }, { kind: "skip", reason: /hold record/ }],
  ["wake feed unreadable", { wake_ack_floor: "unknown" }, { kind: "skip", reason: /wake feed/ }],
  ["never past the log's end (margin 0, every copy level)", { margin: 0, copies: [live("a", 5_000)] }, { kind: "purge", floor: 5_000, purge_below: 5_001 }],
  ["an empty log with level copies purges nothing", { log: { first_seq: 1, last_seq: 0 }, copies: [live("a", 0)], margin: 0 }, { kind: "nothing", floor: 0 }],
];

describe("decideTrim", () => {
  for (const [name, over, want] of rows) {
    test(name, () => {
      const d = decideTrim(facts(over));
      expect(d.kind).toBe(want.kind as never);
      if (want.floor !== undefined) expect(d.floor).toBe(want.floor);
      if (want.purge_below !== undefined) expect(d.purge_below).toBe(want.purge_below);
      if (want.holding !== undefined) expect(d.holding).toBe(want.holding);
      if (want.reason) expect(d.reason).toMatch(want.reason);
      if (want.released) expect(d.released).toEqual(want.released);
      // Whatever the decision, nothing at or above any term's position is ever purged.
      if (d.kind === "purge") for (const t of d.terms) expect(d.purge_below!).toBeLessThanOrEqual(t.position + 1);
    });
  }

  test("how long a term has been holding carries across ticks while it is the same term", () => {
    const first = decideTrim(facts({ previous: null }));
    expect(first.holding_since).toBe(NOW);
    const same = decideTrim(facts({ now_ms: NOW + 900_000, previous: { holding: "copy:b", holding_since: NOW - 5_000 } }));
    expect(same.holding_since).toBe(NOW - 5_000);
    const other = decideTrim(facts({ now_ms: NOW + 900_000, previous: { holding: "hold", holding_since: NOW - 5_000 } }));
    expect(other.holding_since).toBe(NOW + 900_000);
  });
});
