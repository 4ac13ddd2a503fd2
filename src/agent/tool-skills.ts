// Tool skills (spec: Seat Ownership § Singleton duties, "Not everything periodic is a duty"):
// the pages of the configured skills space, read into a process-local registry. Every node
// runs its own walk — at boot, on an apply that moves the source, and every 10 minutes —
// because a node that skipped it would have agents with no tool skills at all; nothing here
// is shared state, so no lease. parseToolSkill is pure; the registry does the reads.
import { createHash } from "node:crypto";
import type { Clock, Timer } from "../clock.ts";
import type { Page } from "../estate/queries.ts";
import type { Logger } from "../log.ts";
import { MAX_SKILL_BODY_BYTES, MAX_SKILL_TERMS } from "../memory/records.ts";
import { cutBytes } from "../memory/reflection.ts";
import type { PromptSkill } from "../memory/skill-pick.ts";
import { normaliseTerms } from "../memory/skill-terms.ts";
import type { EstatePort } from "./tools/estate-port.ts";

/** The periodic walk (the spec's "every 10 minutes"): a page edited without a broadcast
 * reaches every node's prompts within this long. */
export const TOOL_SKILL_SYNC_MS = 10 * 60_000;
/** Pages one walk reads: the pages.list page size. A skills space is a handbook of a few
 * dozen how-tos; past a hundred, the rest wait for the space to be split. */
export const MAX_TOOL_SKILLS = 100;
/** A walk that failed (the estate not answering yet, at boot) is tried again this soon, not
 * ten minutes later: a new node's agents would otherwise start without their tool skills. */
export const TOOL_SKILL_RETRY_MS = 15_000;

/**
 * One page as a tool skill: its title is its name; a first line `triggers: a, b, c` names
 * the terms it fits (else the title's terms); the rest of the body is what the prompt
 * carries, cut to a skill body's bound. Null for a page with nothing to say.
 */
export function parseToolSkill(page: Pick<Page, "container" | "title" | "body">): PromptSkill | null {
  const lines = page.body.split(/\r?\n/);
  const m = /^\s*triggers\s*:\s*(.+)$/i.exec(lines[0] ?? "");
  const body = (m ? lines.slice(1) : lines).join("\n").trim();
  const terms = normaliseTerms(m ? m[1]! : page.title).slice(0, MAX_SKILL_TERMS);
  if (body === "" || terms.length === 0) return null;
  const id = `t${createHash("sha256").update(`${page.container}\u0000${page.title}`).digest("hex").slice(0, 32)}`;
  return { id, name: page.title, kind: "tool", terms, body: cutBytes(body, MAX_SKILL_BODY_BYTES), state: "active", uses: 0 };
}

export interface ToolSkillRegistryOptions {
  estate: Pick<EstatePort, "read">;
  clock: Clock;
  log: Logger;
}

export class ToolSkillRegistry {
  private space: string | null = null;
  private current: readonly PromptSkill[] = [];
  private timer: Timer | null = null;
  private walking: Promise<number> | null = null;
  private retry: Timer | null = null;

  constructor(private readonly o: ToolSkillRegistryOptions) {}

  /** The tool skills this node knows now. */
  skills(): readonly PromptSkill[] {
    return this.current;
  }

  /** The boot walk, then one every TOOL_SKILL_SYNC_MS. */
  start(space: string | null): void {
    this.space = space;
    void this.sync("boot");
    this.timer ??= this.o.clock.setInterval(() => void this.sync("periodic"), TOOL_SKILL_SYNC_MS);
  }

  /** An applied company: a moved source is walked at once (a source removed empties it). */
  setSource(space: string | null): void {
    if (space === this.space) return;
    this.space = space;
    void this.sync("source_moved");
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
    this.retry?.cancel();
    this.retry = null;
  }

  /** One walk; a walk under way is joined rather than doubled. Returns the skills found. */
  sync(why: string): Promise<number> {
    this.walking ??= this.walk(why).finally(() => (this.walking = null));
    return this.walking;
  }

  private async walk(why: string): Promise<number> {
    const space = this.space;
    if (space === null) {
      this.current = [];
      return 0;
    }
    try {
      const listed = await this.o.estate.read({ q: "pages.list", container: space, limit: MAX_TOOL_SKILLS });
      const found: PromptSkill[] = [];
      for (const p of listed) {
        const page = await this.o.estate.read({ q: "pages.get", container: space, title: p.title });
        const skill = page ? parseToolSkill(page) : null;
        if (skill) found.push(skill);
      }
      // A source moved again during the walk: this walk's answer is for the old one.
      if (this.space !== space) return this.current.length;
      this.current = found;
      this.o.log.info("tool_skills_synced", { space, why, pages: listed.length, skills: found.length });
      return found.length;
    } catch (err) {
      // The registry keeps what it had: a store away for a walk is not a reason to forget.
      this.o.log.warn("tool_skills_sync_failed", { space, why, error: err as Error, retry_ms: TOOL_SKILL_RETRY_MS });
      if (this.timer !== null) {
        this.retry ??= this.o.clock.setTimeout(() => {
          this.retry = null;
          void this.sync("retry");
        }, TOOL_SKILL_RETRY_MS);
      }
      return this.current.length;
    }
  }
}
