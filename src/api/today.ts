// The Today view's rules, PURE (table-tested in test/api/today.test.ts): which work in
// progress is stuck, the company days a week covers, and a week's receipts laid out per
// seat per day. The route (routes/turns.ts) reads the estate and calls these.

/** A work item as the stuck rule needs it. */
export interface WorkLike {
  key: string;
  title: string;
  status: string;
  assignee: string | null;
  updated_at: number;
}

export interface StuckWork {
  key: string;
  title: string;
  assignee: string;
  /** The later of the item's last change and the last turn that worked on it (ms). */
  last_moved_at: number;
  /** The last turn on it (ms), null when no receipt names it. */
  last_turn_at: number | null;
  /** How long it has been quiet (ms). */
  quiet_ms: number;
}

/**
 * Work in progress assigned to an agent seat that neither changed nor had a turn on it for
 * `after_ms` or longer, quietest first. Items assigned to a person, unassigned, or in any
 * other status are not the agents' to move.
 */
export function stuckWork(o: { items: readonly WorkLike[]; lastTurn: Readonly<Record<string, number>>; agents: ReadonlySet<string>; now_ms: number; after_ms: number }): StuckWork[] {
  const out: StuckWork[] = [];
  for (const it of o.items) {
    if (it.status !== "in_progress") continue;
    if (it.assignee === null) continue;
    if (!o.agents.has(it.assignee)) continue;
    const turn = o.lastTurn[it.key] ?? null;
    const moved = Math.max(it.updated_at, turn ?? 0);
    const quiet = o.now_ms - moved;
    if (quiet < o.after_ms) continue;
    out.push({ key: it.key, title: it.title, assignee: it.assignee, last_moved_at: moved, last_turn_at: turn, quiet_ms: quiet });
  }
  return out.sort((a, b) => b.quiet_ms - a.quiet_ms || a.key.localeCompare(b.key));
}

/** The `n` calendar days ending on `last_day` (YYYY-MM-DD), oldest first. */
export function daysEnding(last_day: string, n: number): string[] {
  const end = Date.parse(`${last_day}T00:00:00Z`);
  if (Number.isNaN(end)) throw new Error(`not a day: ${last_day}`);
  const out: string[] = [];
  for (let i = n - 1; i >= 0; i--) out.push(new Date(end - i * 86_400_000).toISOString().slice(0, 10));
  return out;
}

export interface WeekCell {
  day: string;
  turns: number;
  outcomes: Record<string, number>;
}

/**
 * Each seat's days in order, every day present (zero when it ran nothing): the seats named
 * first in `seats` order, then any other seat a receipt names (a seat since removed).
 */
export function weekGrid(seats: readonly string[], days: readonly string[], cells: readonly { seat: string; day: string; turns: number; outcomes: Record<string, number> }[]): { seat: string; days: WeekCell[]; turns: number }[] {
  const bySeat = new Map<string, Map<string, WeekCell>>();
  for (const c of cells) {
    if (!days.includes(c.day)) continue;
    const m = bySeat.get(c.seat) ?? new Map<string, WeekCell>();
    m.set(c.day, { day: c.day, turns: c.turns, outcomes: { ...c.outcomes } });
    bySeat.set(c.seat, m);
  }
  const order = [...seats, ...[...bySeat.keys()].filter((s) => !seats.includes(s)).sort()];
  return order.map((seat) => {
    const m = bySeat.get(seat);
    const row = days.map((day) => m?.get(day) ?? { day, turns: 0, outcomes: {} });
    return { seat, days: row, turns: row.reduce((n, d) => n + d.turns, 0) };
  });
}
