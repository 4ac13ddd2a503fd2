// A seat's records that outlive its turn and node (a coding run, a parked approval), keyed
// `{seat}.{id}`. A holder's write is fenced by owner_epoch (spec: Fencing), so a zombie's
// late write bounces; a person's request takes no epoch and is written beside the owner's
// fields. Every write is a compare-and-set.
import type { Clock } from "../clock.ts";
import { CasConflict, type KvEntry, type KvSlot } from "./contract.ts";

/** A write that loses its compare-and-set re-reads and tries again this many times: each
 *  loss means another writer moved the record, and a fenced writer stops at its first read. */
export const CAS_ATTEMPTS = 6;
/** The pause before a re-read after a loss, doubling (50 … 800 ms, 1.55 s in all). While the
 *  winner's write is still in flight the leader refuses (10164) and a re-read sees the old
 *  revision, so back-to-back retries all lose: on an overloaded box five did, and the turn
 *  taking an approval died of it, leaving the decision untaken. */
export const CAS_RETRY_BASE_MS = 50;

/** The fields the fence reads and writes; every fenced record has them. */
export interface FencedFields {
  id: string;
  seat: string;
  /** The incarnation holding the seat that last wrote the record, and its epoch: the fence. */
  owner: string;
  owner_epoch: number;
  updated_at: number;
}

/** Who is writing: the seat's holder, under the grant it holds. */
export interface SeatWriter {
  owner: string;
  epoch: number;
}

/** The fence, pure: a writer whose epoch the record's outranks may not touch it. */
export function fenceRefuses(rec: Pick<FencedFields, "owner_epoch">, writer: SeatWriter): boolean {
  return rec.owner_epoch > writer.epoch;
}

/** How one kind of record is told apart: its codec, and the errors its callers catch. */
export interface RecordKind<T> {
  encode(r: T): Uint8Array;
  decode(data: Uint8Array): { ok: true; value: T } | { ok: false; error: string };
  fenced(id: string, record_epoch: number, writer_epoch: number): Error;
  notFound(id: string): Error;
  /** Oldest first when records tie on nothing else. */
  created_at(r: T): number;
}

/** A change to a record: null leaves it as it is (the write is not needed). */
export type Change<T> = (r: T) => T | null;

export function recordKey(seat: string, id: string): string {
  return `${seat}.${id}`;
}

export class FencedRecords<T extends FencedFields> {
  constructor(
    private readonly slot: KvSlot,
    private readonly clock: Clock,
    private readonly kind: RecordKind<T>,
  ) {}

  /** Fails with CasConflict when the record exists. */
  async create(r: T): Promise<void> {
    await this.slot.create(recordKey(r.seat, r.id), this.kind.encode(r));
  }

  async get(seat: string, id: string): Promise<T | null> {
    const e = await this.slot.get(recordKey(seat, id));
    return e ? this.decodeEntry(e) : null;
  }

  /** A record by id alone (the API's and the CLI's name for it). */
  async find(id: string): Promise<T | null> {
    const entries = await this.slot.entries(`*.${id}`);
    const d = entries[0] ? this.kind.decode(entries[0].value) : null;
    return d?.ok ? d.value : null;
  }

  /** Every record of one seat (or of every seat), oldest first; an undecodable one is
   *  reported, not skipped silently. */
  async list(seat?: string): Promise<{ records: T[]; invalid: { key: string; error: string }[] }> {
    const entries = await this.slot.entries(seat ? `${seat}.*` : undefined);
    const records: T[] = [];
    const invalid: { key: string; error: string }[] = [];
    for (const e of entries) {
      const d = this.kind.decode(e.value);
      if (d.ok) records.push(d.value);
      else invalid.push({ key: e.key, error: d.error });
    }
    records.sort((a, b) => this.kind.created_at(a) - this.kind.created_at(b) || a.id.localeCompare(b.id));
    return { records, invalid };
  }

  /**
   * Applies `change` under the fence, as writer: the record's owner and owner_epoch become
   * the writer's. Refused (the kind's fenced error) when the record's epoch outranks the
   * writer's; a lost compare-and-set re-reads and re-judges. Returns the record as written
   * (or as found, when the change needed no write).
   */
  mutate(seat: string, id: string, writer: SeatWriter, change: Change<T>): Promise<T> {
    return this.write(seat, id, (cur) => {
      if (fenceRefuses(cur, writer)) throw this.kind.fenced(id, cur.owner_epoch, writer.epoch);
      const next = change(cur);
      return next === null ? null : { ...next, owner: writer.owner, owner_epoch: writer.epoch };
    });
  }

  /**
   * A request from someone who holds no seat (a person's cancel or decision): `change`
   * may not touch the owner's fields, and none are taken. Returns the record as written or
   * as found.
   */
  request(seat: string, id: string, change: Change<T>): Promise<T> {
    return this.write(seat, id, (cur) => {
      const next = change(cur);
      return next === null ? null : { ...next, owner: cur.owner, owner_epoch: cur.owner_epoch };
    });
  }

  /** Deletes a record when `settled` says it is history; false when it is not (any more). */
  async forget(seat: string, id: string, settled: (r: T) => boolean): Promise<boolean> {
    const key = recordKey(seat, id);
    const e = await this.slot.get(key);
    if (!e) return false;
    if (!settled(this.decodeEntry(e))) return false;
    try {
      await this.slot.delete(key, e.revision);
      return true;
    } catch (err) {
      if (err instanceof CasConflict) return false;
      throw err;
    }
  }

  /** Deletes a record under the fence (a retirement, a sweep of old records). */
  async remove(seat: string, id: string, writer: SeatWriter): Promise<void> {
    const key = recordKey(seat, id);
    const e = await this.slot.get(key);
    if (!e) return;
    const cur = this.decodeEntry(e);
    if (fenceRefuses(cur, writer)) throw this.kind.fenced(id, cur.owner_epoch, writer.epoch);
    await this.slot.delete(key, e.revision);
  }

  private async write(seat: string, id: string, judge: (cur: T) => T | null): Promise<T> {
    const key = recordKey(seat, id);
    for (let attempt = 1; ; attempt++) {
      const e = await this.slot.get(key);
      if (!e) throw this.kind.notFound(id);
      const cur = this.decodeEntry(e);
      const next = judge(cur);
      if (next === null) return cur;
      const written = { ...next, updated_at: this.clock.now() };
      try {
        await this.slot.update(key, this.kind.encode(written), e.revision);
        return written;
      } catch (err) {
        if (!(err instanceof CasConflict) || attempt >= CAS_ATTEMPTS) throw err;
      }
      await this.clock.sleep(CAS_RETRY_BASE_MS * 2 ** (attempt - 1));
    }
  }

  private decodeEntry(e: KvEntry): T {
    const d = this.kind.decode(e.value);
    if (!d.ok) throw new Error(`record ${e.key} in ${this.slot.bucket} cannot be read: ${d.error}`);
    return d.value;
  }
}
