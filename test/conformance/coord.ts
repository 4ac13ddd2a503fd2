// ONE conformance suite for the coordination contract (leases with epochs, KV slots with
// compare-and-set), run against every backend by a *.test.ts per backend: the in-memory
// twin on a FakeClock, JetStream KV on one member (R1) and on a 3-member cluster (R3) with
// a member killed mid-suite. It asserts behaviour, never timing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CasConflict, LEASE_PROTOCOL, SLOT_NAMES, type AcquireResult, type KvEntry, type Lease, type LeaseStore } from "../../src/coord/contract.ts";
import { encodeLeaseKey } from "../../src/coord/bucket.ts";
import { DUTIES_BUCKET, EPOCHS_BUCKET, LEASES_BUCKET } from "../../src/coord/buckets.ts";
import { StoreFaults, writeTo, type StoreOp } from "../../src/coord/faults.ts";
import type { CoordinationHandle } from "../../src/coord/index.ts";
import { TOKEN_WRITE_ATTEMPTS } from "../../src/coord/leases.ts";
import type { Clock } from "../../src/clock.ts";

export interface CoordHarness {
  /** One node's handle on the shared store (its own protocol and faults). */
  open(opts?: { protocol?: number; faults?: StoreFaults }): Promise<CoordinationHandle>;
  clock: Clock;
  /** The lease TTL the store runs with (short on real servers, via options). */
  lease_ttl_ms: number;
  /** Let `ms` pass on the store's clock (a fake clock advances; a real one is waited on). */
  elapse(ms: number): Promise<void>;
  /** Disturb the store while the contention case runs (the cluster kills a member). */
  disrupt?(): Promise<void>;
  teardown(): Promise<void>;
}

/** Generous: only a hung backend takes this long; nothing here measures speed. */
const EVENTUALLY_MS = 30_000;
/** Per case: cases wait out real lease TTLs on real servers, and one rides out a leader election. */
const CASE_TIMEOUT_MS = 90_000;

let serial = 0;
function uniq(tag: string): string {
  serial += 1;
  return `${tag}-${serial}-${Math.random().toString(36).slice(2, 7)}`;
}
const owner = (node: string) => `${node}:${Math.random().toString(36).slice(2, 10)}`;
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (d: Uint8Array) => new TextDecoder().decode(d);

/** Retries of an `unknown` claim: a store that did not answer (a member killed mid-suite)
 * says nothing about the lease, and the contract lets a caller ask again. Bounded. */
const UNKNOWN_RETRIES = 8;
async function settled(fn: () => Promise<AcquireResult>): Promise<AcquireResult> {
  let r = await fn();
  for (let i = 0; i < UNKNOWN_RETRIES && !r.ok && r.rule === "unknown"; i++) {
    await Bun.sleep(250);
    r = await fn();
  }
  return r;
}

/** Bound on one heartbeat's renewals: a case lasts at most CASE_TIMEOUT_MS, which at a
 *  third of the shortest TTL the suites run (1 s) is 270 beats. */
const HEARTBEAT_BEATS_MAX = 300;

/**
 * Renews a lease every third of its TTL until stopped, as the node holding it would. A case
 * that holds a lease across calls that may each take a whole call budget (a member killed,
 * a consumer placed on it) keeps the lease live the way the fleet does, instead of
 * assuming those calls are quick. A renewal that says `lost` ends the heartbeat and is
 * reported, so a case still fails when a tenure is really lost.
 */
function heartbeat(store: LeaseStore, lease: Lease, clock: Clock, ttl_ms: number): { stop(): Promise<{ lost: boolean }> } {
  const abort = new AbortController();
  let lost = false;
  const beating = (async () => {
    for (let beat = 0; beat < HEARTBEAT_BEATS_MAX; beat++) {
      await clock.sleep(Math.floor(ttl_ms / 3), abort.signal);
      const r = await store.renew(lease.key, lease.owner, lease.epoch);
      if (r.status === "lost") {
        lost = true;
        return;
      }
      if (abort.signal.aborted) return;
    }
  })().catch(() => undefined);
  return {
    async stop() {
      abort.abort(new Error("heartbeat stopped"));
      await beating;
      return { lost };
    },
  };
}

function okLease(r: AcquireResult): Lease {
  if (!r.ok) throw new Error(`expected a lease, got ${JSON.stringify(r)}`);
  return r.lease;
}

async function rejectsCas(p: Promise<unknown>): Promise<void> {
  let err: unknown = null;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(CasConflict);
}

export function coordConformance(name: string, make: () => Promise<CoordHarness>): void {
  describe(`coordination conformance: ${name}`, () => {
    let h: CoordHarness;
    let a: CoordinationHandle;
    let b: CoordinationHandle;
    let ttl: number;

    /** Polls on the store's clock until pred holds (the key left the bucket, the store is back). */
    async function eventually(what: string, pred: () => Promise<boolean>): Promise<void> {
      const deadline = Date.now() + EVENTUALLY_MS;
      for (;;) {
        try {
          if (await pred()) return;
        } catch {
          // a store mid-recovery: ask again
        }
        if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
        await h.elapse(Math.max(20, Math.floor(ttl / 10)));
      }
    }

    const claim = (store: CoordinationHandle, key: string, who: string, extra: Partial<Parameters<CoordinationHandle["leases"]["acquire"]>[1]> = {}) =>
      store.leases.acquire(key, { owner: who, preferred: who.split(":")[0]!, ttl_ms: ttl, ...extra });
    /** A claim asked again while the store answers `unknown` (for cases that inject no faults). */
    const claimSettled = (store: CoordinationHandle, key: string, who: string, extra: Partial<Parameters<CoordinationHandle["leases"]["acquire"]>[1]> = {}) =>
      settled(() => claim(store, key, who, extra));

    beforeAll(async () => {
      h = await make();
      ttl = h.lease_ttl_ms;
      a = await h.open();
      b = await h.open();
    });

    afterAll(async () => {
      await a?.close();
      await b?.close();
      await h?.teardown();
    }, CASE_TIMEOUT_MS);

    test("acquire is exclusive: a second owner is refused `held`, and of racing claims exactly one wins", async () => {
      const key = `seat:${uniq("excl")}`;
      const oa = owner("node-a");
      const first = okLease(await claim(a, key, oa));
      expect(first.owner).toBe(oa);
      expect(first.epoch).toBeGreaterThan(0);
      const refused = await claim(b, key, owner("node-b"));
      expect(refused).toEqual({ ok: false, rule: "held", holder: oa, epoch: first.epoch });

      const raced = `seat:${uniq("race")}`;
      const contenders = [a, b, a, b, a, b];
      const results = await Promise.all(contenders.map((c, i) => claim(c, raced, owner(`node-${i}`))));
      const winners = results.filter((r) => r.ok);
      expect(winners).toHaveLength(1);
      for (const r of results) if (!r.ok) expect(r.rule).toBe("held");
      const view = await b.leases.get(raced);
      expect(view?.owner).toBe(okLease(winners[0]!).owner);
      expect(view?.live).toBe(true);
    }, CASE_TIMEOUT_MS);

    test("epochs strictly increase across release, expiry and re-acquire, even after the key expired from the bucket", async () => {
      const key = `seat:${uniq("epochs")}`;
      const oa = owner("node-a");
      const ob = owner("node-b");
      const e1 = okLease(await claim(a, key, oa));
      expect(await a.leases.release(key, oa, e1.epoch)).toBe("released");
      expect(await b.leases.get(key)).toBeNull();
      const e2 = okLease(await claim(b, key, ob));
      expect(e2.epoch).toBeGreaterThan(e1.epoch);
      // Not renewed: the record lapses, and the bucket's age drops the key silently.
      await h.elapse(ttl + 50);
      await eventually("the lapsed key to leave the bucket", async () => (await a.leases.get(key)) === null);
      const e3 = okLease(await claim(a, key, oa));
      expect(e3.epoch).toBeGreaterThan(e2.epoch);
      const e4 = okLease(await claim(b, key, ob).then(async (r) => {
        expect(r).toMatchObject({ ok: false, rule: "held", holder: oa });
        expect(await a.leases.release(key, oa, e3.epoch)).toBe("released");
        return claim(b, key, ob);
      }));
      expect(e4.epoch).toBeGreaterThan(e3.epoch);
    }, CASE_TIMEOUT_MS);

    test("a lapsed lease refuses renew (lost), is listed as not live, and re-acquiring bumps the epoch", async () => {
      const prefix = `seat:${uniq("lapse")}`;
      const lapsing = `${prefix}-x`;
      const kept = `${prefix}-y`;
      const oa = owner("node-a");
      const l = okLease(await claim(a, lapsing, oa));
      const k = okLease(await claim(a, kept, oa));
      // Keep one renewed, let the other lapse.
      for (let i = 0; i < 3; i++) {
        await h.elapse(Math.floor(ttl / 2));
        expect((await a.leases.renew(kept, oa, k.epoch)).status).toBe("renewed");
      }
      const listed = await b.leases.list(prefix);
      expect(listed.find((v) => v.key === kept)?.live).toBe(true);
      expect(listed.find((v) => v.key === lapsing)?.live ?? false).toBe(false);
      // What `live` is judged from: time left on the store's clock, never more than a TTL.
      const keptView = listed.find((v) => v.key === kept)!;
      expect(keptView.remaining_ms).toBeGreaterThan(0);
      expect(keptView.remaining_ms).toBeLessThanOrEqual(ttl);
      expect(listed.find((v) => v.key === lapsing)?.remaining_ms ?? 0).toBeLessThanOrEqual(0);
      expect(await a.leases.renew(lapsing, oa, l.epoch)).toEqual({ status: "lost" });
      const again = okLease(await claim(a, lapsing, oa));
      expect(again.epoch).toBeGreaterThan(l.epoch);
      expect(await a.leases.renew(lapsing, oa, l.epoch)).toEqual({ status: "lost" });
      expect((await a.leases.renew(lapsing, oa, again.epoch)).status).toBe("renewed");
    }, CASE_TIMEOUT_MS);

    test("a watched listing shows what a listing shows: claims, renewals, give-backs and lapses", async () => {
      const prefix = `seat:${uniq("watched")}`;
      const oa = owner("node-a");
      const x = okLease(await claimSettled(a, `${prefix}-x`, oa));
      const y = okLease(await claimSettled(a, `${prefix}-y`, oa));
      // Fresh within a whole TTL: the case's renewals keep the watch hearing.
      const fresh = ttl;
      const same = async () => {
        const [watched, listed] = [await b.leases.listWatched(prefix, fresh), await b.leases.list(prefix)];
        const shape = (vs: typeof listed) => vs.map((v) => `${v.key}@${v.epoch}:${v.live}`).join(",");
        return shape(watched) === shape(listed);
      };
      await eventually("the watched listing to show both claims", async () => (await b.leases.listWatched(prefix, fresh)).length === 2 && (await same()));
      const z = okLease(await claimSettled(a, `${prefix}-z`, oa));
      expect(await a.leases.release(`${prefix}-x`, oa, x.epoch)).toBe("released");
      await eventually("the watched listing to show the claim and the give-back", async () => {
        const keys = (await b.leases.listWatched(prefix, fresh)).map((v) => v.key);
        return keys.join(",") === [`${prefix}-y`, `${prefix}-z`].join(",") && (await same());
      });
      // Renew z and let y lapse: the watched listing judges `live` on the store's clock too.
      const deadline = Date.now() + EVENTUALLY_MS;
      while (Date.now() < deadline) {
        await h.elapse(Math.floor(ttl / 3));
        expect((await a.leases.renew(`${prefix}-z`, oa, z.epoch)).status).toBe("renewed");
        const views = await b.leases.listWatched(prefix, fresh);
        if (views.find((v) => v.key === `${prefix}-y`)?.live === false) break;
      }
      const views = await b.leases.listWatched(prefix, fresh);
      expect(views.find((v) => v.key === `${prefix}-y`)).toMatchObject({ live: false, epoch: y.epoch });
      expect(views.find((v) => v.key === `${prefix}-z`)).toMatchObject({ live: true, epoch: z.epoch });
    }, CASE_TIMEOUT_MS);

    test("the same owner re-acquiring gets a new epoch, which fences its own past tenure", async () => {
      const key = `seat:${uniq("same")}`;
      const oa = owner("node-a");
      const e1 = okLease(await claim(a, key, oa));
      const e2 = okLease(await claim(a, key, oa));
      expect(e2.epoch).toBeGreaterThan(e1.epoch);
      expect(await a.leases.renew(key, oa, e1.epoch)).toEqual({ status: "lost" });
      expect(await a.leases.release(key, oa, e1.epoch)).toBe("not_held");
      expect((await a.leases.renew(key, oa, e2.epoch)).status).toBe("renewed");
      expect(await a.leases.release(key, oa, e2.epoch)).toBe("released");
      const e3 = okLease(await claim(a, key, oa));
      expect(e3.epoch).toBeGreaterThan(e2.epoch);
    }, CASE_TIMEOUT_MS);

    test("acquired_at is the store's stamp of the winning write and no renewal restamps it", async () => {
      const key = `node:${uniq("since")}`;
      const oa = owner("node-a");
      const before = await a.leases.now();
      const lease = okLease(await claim(a, key, oa, { meta: { roles: ["seats"], seats_held: 0 } }));
      expect(lease.acquired_at).toBeGreaterThanOrEqual(before);
      expect(lease.expires_at).toBeGreaterThanOrEqual(lease.acquired_at + ttl);
      expect(lease.protocol).toBe(LEASE_PROTOCOL);
      expect(lease.preferred).toBe("node-a");
      let last = lease;
      for (let i = 0; i < 2; i++) {
        await h.elapse(Math.floor(ttl / 4));
        const r = await a.leases.renew(key, oa, lease.epoch, { roles: ["seats"], seats_held: i + 1 });
        if (r.status !== "renewed") throw new Error(`renew: ${JSON.stringify(r)}`);
        expect(r.lease.acquired_at).toBe(lease.acquired_at);
        expect(r.lease.expires_at).toBeGreaterThan(last.expires_at);
        expect(r.lease.epoch).toBe(lease.epoch);
        expect(r.lease.meta).toEqual({ roles: ["seats"], seats_held: i + 1 });
        last = r.lease;
      }
      const readFrom = await a.leases.now();
      const seen = await b.leases.get(key);
      const readTo = await a.leases.now();
      expect(seen).toMatchObject({ acquired_at: lease.acquired_at, expires_at: last.expires_at, live: true, epoch: lease.epoch });
      // Time left is judged on the store's clock during the read.
      expect(seen!.remaining_ms).toBeLessThanOrEqual(last.expires_at - readFrom);
      expect(seen!.remaining_ms).toBeGreaterThanOrEqual(last.expires_at - readTo);
      expect(seen!.remaining_ms).toBeLessThanOrEqual(ttl);
      expect(await a.leases.release(key, oa, lease.epoch)).toBe("released");
    }, CASE_TIMEOUT_MS);

    test("a claim that fails part way leaves nothing held, and its owner can claim again at once", async () => {
      const faults = new StoreFaults(h.clock);
      const f = await h.open({ faults });
      const oa = owner("node-a");
      try {
        const cases: { what: string; arm: (wire: string) => void }[] = [
          { what: "the counter write fails", arm: () => faults.failNext(writeTo(EPOCHS_BUCKET)) },
          { what: "the counter write's answer is lost", arm: () => faults.loseNextAnswer(writeTo(EPOCHS_BUCKET)) },
          // Every token write the claim makes fails (a second is made when the first did not land).
          { what: "the token write fails", arm: (w) => faults.failNext((op) => op.kind === "update" && op.bucket === LEASES_BUCKET && op.key === w, TOKEN_WRITE_ATTEMPTS) },
          { what: "the claiming write's answer is lost", arm: (w) => faults.loseNextAnswer(writeTo(LEASES_BUCKET, w)) },
          { what: "the claim's read-back fails", arm: (w) => faults.failNext((op) => op.kind === "at" && op.key === w) },
        ];
        for (const c of cases) {
          const key = `seat:${uniq("partial")}`;
          const wire = encodeLeaseKey(key);
          const prior = okLease(await claim(f, key, oa));
          expect(await f.leases.release(key, oa, prior.epoch)).toBe("released");
          c.arm(wire);
          const failed = await claim(f, key, oa);
          expect({ what: c.what, rule: failed.ok ? "ok" : failed.rule }).toEqual({ what: c.what, rule: "unknown" });
          expect({ what: c.what, held: await b.leases.get(key) }).toEqual({ what: c.what, held: null });
          const peer = okLease(await claim(b, key, owner("node-b")));
          expect(peer.epoch).toBeGreaterThan(prior.epoch);
          expect(await b.leases.release(key, peer.owner, peer.epoch)).toBe("released");
          const again = okLease(await claim(f, key, oa));
          expect(again.epoch).toBeGreaterThan(peer.epoch);
        }
        // A token write whose answer was lost did commit: the claim reads it back and says so.
        const key = `seat:${uniq("committed")}`;
        faults.loseNextAnswer((op) => op.kind === "update" && op.key === encodeLeaseKey(key));
        const won = okLease(await claim(f, key, oa));
        expect((await b.leases.get(key))?.epoch).toBe(won.epoch);
        expect((await f.leases.renew(key, oa, won.epoch)).status).toBe("renewed");
      } finally {
        await f.close();
      }
    }, CASE_TIMEOUT_MS);

    test("a write refused or unanswered while the record is still the claim's or the tenure's is judged by the record read back", async () => {
      const faults = new StoreFaults(h.clock);
      const f = await h.open({ faults });
      const oa = owner("node-a");
      try {
        const key = `seat:${uniq("judged")}`;
        const wire = encodeLeaseKey(key);
        const tokenWrite = (op: StoreOp) => op.kind === "update" && op.bucket === LEASES_BUCKET && op.key === wire;
        // A token write refused with nothing in its way (a new stream leader that has not
        // applied the claiming write yet): the claim asks again and commits.
        faults.conflictNext(tokenWrite);
        const lease = okLease(await claim(f, key, oa));
        expect(await b.leases.get(key)).toMatchObject({ owner: oa, epoch: lease.epoch, live: true });
        // A renewal refused likewise is no loss: the record is still this tenure's.
        faults.conflictNext(writeTo(LEASES_BUCKET, wire));
        expect((await f.leases.renew(key, oa, lease.epoch)).status).toBe("renewed");
        // A release refused likewise still releases.
        faults.conflictNext(writeTo(LEASES_BUCKET, wire));
        expect(await f.leases.release(key, oa, lease.epoch)).toBe("released");
        expect(await b.leases.get(key)).toBeNull();
        // A release whose answer was lost did release.
        const again = okLease(await claim(f, key, oa));
        expect(again.epoch).toBeGreaterThan(lease.epoch);
        faults.loseNextAnswer(writeTo(LEASES_BUCKET, wire));
        expect(await f.leases.release(key, oa, again.epoch)).toBe("released");
        expect(await b.leases.get(key)).toBeNull();
        // Refused every time it asks: unknown, and nothing is left held.
        faults.conflictNext(tokenWrite, TOKEN_WRITE_ATTEMPTS);
        expect(await claim(f, key, oa)).toMatchObject({ ok: false, rule: "unknown" });
        expect(await b.leases.get(key)).toBeNull();
        // A rival's tenure read back is never taken for ours: renew is lost, release not held.
        const rival = okLease(await claim(b, key, owner("node-b")));
        expect(rival.epoch).toBeGreaterThan(again.epoch);
        expect(await f.leases.renew(key, oa, again.epoch)).toEqual({ status: "lost" });
        expect(await f.leases.release(key, oa, again.epoch)).toBe("not_held");
        expect(await a.leases.get(key)).toMatchObject({ owner: rival.owner, epoch: rival.epoch, live: true });
        // An earlier ask by the same owner that committed between this ask's read and its
        // first write is no rival: unknown (never `held` by itself), and the next ask
        // re-acquires over it with a new epoch.
        const own = `seat:${uniq("own")}`;
        const ownWire = encodeLeaseKey(own);
        let earlier: AcquireResult | null = null;
        faults.onOp = async (op) => {
          if (earlier || op.kind !== "create" || op.bucket !== LEASES_BUCKET || op.key !== ownWire) return;
          earlier = await claim(b, own, oa);
        };
        const raced = await claim(f, own, oa);
        faults.onOp = null;
        expect(raced).toMatchObject({ ok: false, rule: "unknown" });
        const first = okLease(earlier!);
        const next = okLease(await claim(f, own, oa));
        expect(next.epoch).toBeGreaterThan(first.epoch);
        expect(await f.leases.release(own, oa, first.epoch)).toBe("not_held");
        expect(await f.leases.release(own, oa, next.epoch)).toBe("released");
      } finally {
        await f.close();
      }
    }, CASE_TIMEOUT_MS);

    test("a give-back never removes a sibling's claim", async () => {
      const key = `seat:${uniq("sibling")}`;
      const faults = new StoreFaults(h.clock);
      const old = await h.open({ faults });
      const oldOwner = owner("node-s");
      const newOwner = owner("node-s");
      const sibling: { result: AcquireResult | null } = { result: null };
      faults.onOp = async (op) => {
        if (sibling.result || op.bucket !== EPOCHS_BUCKET || (op.kind !== "create" && op.kind !== "update")) return;
        // Between this claim's first and second write, the node's next incarnation (holding
        // the store-dir lock) takes the seat over; then this claim's counter write fails.
        sibling.result = await claim(b, key, newOwner, { takeover: (o) => o === oldOwner });
        faults.failNext(writeTo(EPOCHS_BUCKET));
      };
      try {
        const failed = await claim(old, key, oldOwner);
        expect(failed.ok).toBe(false);
        const won = okLease(sibling.result!);
        const view = await a.leases.get(key);
        expect(view).toMatchObject({ owner: newOwner, epoch: won.epoch, live: true });
        expect((await b.leases.renew(key, newOwner, won.epoch)).status).toBe("renewed");
      } finally {
        await old.close();
      }
    }, CASE_TIMEOUT_MS);

    test("a new incarnation of a node takes over its predecessor's live lease with a new epoch; nobody else can", async () => {
      const key = `seat:${uniq("takeover")}`;
      const first = owner("node-t");
      const lease = okLease(await claim(a, key, first));
      expect(await claim(b, key, owner("node-u"))).toMatchObject({ ok: false, rule: "held", holder: first });
      const next = owner("node-t");
      expect(await claim(b, key, next)).toMatchObject({ ok: false, rule: "held" });
      // The same node id under an incarnation this process has not proved dead (another
      // store's process): refused.
      expect(await claim(b, key, next, { takeover: (o) => o !== first })).toMatchObject({ ok: false, rule: "held", holder: first });
      const took = okLease(await claim(b, key, next, { takeover: (o) => o === first }));
      expect(took.epoch).toBeGreaterThan(lease.epoch);
      expect(await a.leases.renew(key, first, lease.epoch)).toEqual({ status: "lost" });
      expect(await a.leases.release(key, first, lease.epoch)).toBe("not_held");
      expect(await claim(a, key, owner("node-u"), { takeover: () => true })).toMatchObject({ ok: false, rule: "held", holder: next });
    }, CASE_TIMEOUT_MS);

    test("on an unreachable store, renew is `unknown` and the lease is untouched; a lost renew answer is not a loss", async () => {
      const key = `seat:${uniq("blip")}`;
      const faults = new StoreFaults(h.clock);
      const f = await h.open({ faults });
      const oa = owner("node-a");
      try {
        const lease = okLease(await claim(f, key, oa));
        const before = await b.leases.get(key);
        faults.unreachable = true;
        const r = await f.leases.renew(key, oa, lease.epoch);
        expect(r.status).toBe("unknown");
        expect(await f.leases.release(key, oa, lease.epoch)).toBe("unknown");
        expect((await claim(f, `seat:${uniq("blip")}`, oa)).ok).toBe(false);
        const after = await b.leases.get(key);
        expect(after).toEqual({ ...before!, live: after!.live, remaining_ms: after!.remaining_ms });
        expect(after!.live).toBe(true);
        faults.unreachable = false;
        expect((await f.leases.renew(key, oa, lease.epoch)).status).toBe("renewed");
        // The renew landed, its answer did not: unknown, and the next renew finds it ours.
        faults.loseNextAnswer(writeTo(LEASES_BUCKET, encodeLeaseKey(key)));
        expect((await f.leases.renew(key, oa, lease.epoch)).status).toBe("unknown");
        expect((await f.leases.renew(key, oa, lease.epoch)).status).toBe("renewed");
        expect(await f.leases.release(key, oa, lease.epoch)).toBe("released");
      } finally {
        await f.close();
      }
    }, CASE_TIMEOUT_MS);

    test("a renewal over the tenure's last write reads nothing first; a write between is judged by the record read, as before", async () => {
      const faults = new StoreFaults(h.clock);
      const f = await h.open({ faults });
      const oa = owner("node-a");
      try {
        const key = `seat:${uniq("known")}`;
        const wire = encodeLeaseKey(key);
        const seen: string[] = [];
        const renewCalls = async (epoch: number, who = oa) => {
          seen.length = 0;
          faults.onOp = (op) => void (op.bucket === LEASES_BUCKET && op.key === wire && seen.push(op.kind));
          const r = await f.leases.renew(key, who, epoch);
          faults.onOp = null;
          return { status: r.status, calls: [...seen] };
        };
        const lease = okLease(await claim(f, key, oa));
        // After the claim and after each renewal: the write and the read of its stamp.
        expect(await renewCalls(lease.epoch)).toEqual({ status: "renewed", calls: ["update", "at"] });
        expect(await renewCalls(lease.epoch)).toEqual({ status: "renewed", calls: ["update", "at"] });
        // A renewal of ours that landed with its answer lost moved the revision: the write
        // over the one remembered is refused, the record read is still ours, and it renews.
        faults.loseNextAnswer(writeTo(LEASES_BUCKET, wire));
        expect((await f.leases.renew(key, oa, lease.epoch)).status).toBe("unknown");
        expect(await renewCalls(lease.epoch)).toEqual({ status: "renewed", calls: ["update", "get", "update", "at"] });
        // A new incarnation took it over: refused, read, lost — never renewed over a rival.
        const next = owner("node-a");
        const took = okLease(await claim(b, key, next, { takeover: (o) => o === oa }));
        expect(await renewCalls(lease.epoch)).toEqual({ status: "lost", calls: ["update", "get"] });
        expect(await b.leases.get(key)).toMatchObject({ owner: next, epoch: took.epoch, live: true });
        // Asked again with nothing remembered: the read first, as always.
        expect(await renewCalls(lease.epoch)).toEqual({ status: "lost", calls: ["get"] });
        // A tenure given back and claimed again is a new write to remember.
        expect(await b.leases.release(key, next, took.epoch)).toBe("released");
        const again = okLease(await claim(f, key, oa));
        expect(await renewCalls(again.epoch)).toEqual({ status: "renewed", calls: ["update", "at"] });
        expect(await renewCalls(lease.epoch)).toEqual({ status: "lost", calls: ["get"] });
      } finally {
        faults.onOp = null;
        await f.close();
      }
    }, CASE_TIMEOUT_MS);

    test("exclusivity holds under contention while the store is disturbed (calls may be unknown)", async () => {
      const keys = [0, 1, 2].map(() => `seat:${uniq("contend")}`);
      const nodes = await Promise.all([0, 1, 2, 3].map(() => h.open()));
      const owners = nodes.map((_, i) => owner(`node-c${i}`));
      type Grant = { key: string; owner: string; epoch: number; acquired_at: number; expires_at: number };
      const grants: Grant[] = [];
      const held = new Map<string, Grant>(); // `${node}|${key}` → current grant
      let unknowns = 0;
      const rounds = 16;
      let disrupted: Promise<void> | null = null;
      try {
        for (let round = 0; round < rounds; round++) {
          if (round === 4 && h.disrupt) disrupted = h.disrupt();
          await Promise.all(
            nodes.map(async (n, i) => {
              for (const key of keys) {
                const mine = held.get(`${i}|${key}`);
                if (mine) {
                  const r = await n.leases.renew(key, owners[i]!, mine.epoch);
                  if (r.status === "renewed") mine.expires_at = r.lease.expires_at;
                  else if (r.status === "lost") held.delete(`${i}|${key}`);
                  else unknowns += 1;
                  continue;
                }
                const r = await n.leases.acquire(key, { owner: owners[i]!, preferred: `node-c${i}`, ttl_ms: ttl });
                if (r.ok) {
                  const g = { key, owner: r.lease.owner, epoch: r.lease.epoch, acquired_at: r.lease.acquired_at, expires_at: r.lease.expires_at };
                  grants.push(g);
                  held.set(`${i}|${key}`, g);
                } else if (r.rule === "unknown") unknowns += 1;
              }
            }),
          );
          await h.elapse(Math.floor(ttl / 3));
          // Now and then a holder stops renewing (a crash), so tenures move.
          if (round % 5 === 2) held.clear();
        }
        await disrupted;
        for (const key of keys) {
          const mine = grants.filter((g) => g.key === key).sort((x, y) => x.epoch - y.epoch);
          expect(mine.length).toBeGreaterThan(0);
          for (let i = 1; i < mine.length; i++) {
            const prev = mine[i - 1]!;
            const next = mine[i]!;
            expect(next.epoch).toBeGreaterThan(prev.epoch);
            // Another owner's tenure starts only once the previous one's proven expiry passed.
            if (next.owner !== prev.owner) expect(next.acquired_at).toBeGreaterThanOrEqual(prev.expires_at);
          }
        }
        // The store answers again before the suite moves on.
        await eventually("the store to answer again", async () => (await a.leases.now()) > 0);
        // What the store holds now agrees with every grant: no grant's epoch is past the
        // record's (a tenure the store never recorded), and the last grant, if it is still
        // the record's epoch, is the record's owner.
        for (const key of keys) {
          const last = grants.filter((g) => g.key === key).reduce((x, y) => (y.epoch > x.epoch ? y : x));
          let view: Awaited<ReturnType<typeof a.leases.get>> = null;
          await eventually(`a read of ${key}`, async () => ((view = await a.leases.get(key)), true));
          const seen = view as Awaited<ReturnType<typeof a.leases.get>>;
          if (seen === null) continue; // lapsed and aged out of the bucket
          expect(seen.epoch).toBeGreaterThanOrEqual(last.epoch);
          if (seen.epoch === last.epoch) expect(seen.owner).toBe(last.owner);
        }
        if (!h.disrupt) expect(unknowns).toBe(0);
      } finally {
        await Promise.all(nodes.map((n) => n.close()));
      }
    }, CASE_TIMEOUT_MS);

    test("the protocol gate refuses a seat claim above a lower live presence or seat lease, names the floor, and ignores duty leases", async () => {
      const older = await h.open({ protocol: 3 });
      const oldOwner = owner("node-old");
      const newOwner = owner("node-new");
      const beats: ReturnType<typeof heartbeat>[] = [];
      const beat = (lease: Lease) => {
        const hb = heartbeat(older.leases, lease, h.clock, ttl);
        beats.push(hb);
        return hb;
      };
      try {
        // An older build's duty lease never holds newer nodes back.
        const duty = await older.duties.acquire(`worker:${uniq("duty")}`, { owner: oldOwner, preferred: "node-old", ttl_ms: ttl * 10 });
        expect(duty.ok).toBe(true);
        const free = `seat:${uniq("gate")}`;
        const s1 = okLease(await claimSettled(a, free, newOwner, { gate: true }));
        expect(await a.leases.release(free, newOwner, s1.epoch)).toBe("released");

        // Its presence does. The older node keeps it (and its seat below) renewed while
        // the case asks its questions, as it would in the fleet.
        const presence = okLease(await settled(() => older.leases.acquire(`node:${uniq("old")}`, { owner: oldOwner, preferred: "node-old", ttl_ms: ttl })));
        const presenceBeat = beat(presence);
        expect(presence.protocol).toBe(3);
        const gated = `seat:${uniq("gate")}`;
        expect(await claimSettled(a, gated, newOwner, { gate: true })).toEqual({ ok: false, rule: "protocol", floor: 3 });
        expect(await b.leases.get(gated)).toBeNull();
        expect(await a.leases.protocolFloor()).toBe(3);
        // A seat a peer holds is refused for the hold, judging no gate.
        const theirs = `seat:${uniq("gate")}`;
        const oldSeat = okLease(await settled(() => older.leases.acquire(theirs, { owner: oldOwner, preferred: "node-old", ttl_ms: ttl, gate: true })));
        const seatBeat = beat(oldSeat);
        expect(await claimSettled(a, theirs, newOwner, { gate: true })).toEqual({ ok: false, rule: "held", holder: oldOwner, epoch: oldSeat.epoch });

        // Presence gone, the older seat lease still counts.
        expect(await presenceBeat.stop()).toEqual({ lost: false });
        expect(await older.leases.release(presence.key, oldOwner, presence.epoch)).toBe("released");
        expect(await claimSettled(a, gated, newOwner, { gate: true })).toEqual({ ok: false, rule: "protocol", floor: 3 });
        // Released: the gate opens.
        expect(await seatBeat.stop()).toEqual({ lost: false });
        expect(await older.leases.release(theirs, oldOwner, oldSeat.epoch)).toBe("released");
        const s2 = okLease(await claimSettled(a, gated, newOwner, { gate: true }));
        expect(await a.leases.release(gated, newOwner, s2.epoch)).toBe("released");

        // A lower lease that lapsed does not count either: live, it gates; unrenewed, it lapses.
        const lapsing = beat(okLease(await settled(() => older.leases.acquire(`node:${uniq("old")}`, { owner: oldOwner, preferred: "node-old", ttl_ms: ttl }))));
        const later = `seat:${uniq("gate")}`;
        expect(await claimSettled(a, later, newOwner, { gate: true })).toMatchObject({ ok: false, rule: "protocol", floor: 3 });
        expect(await lapsing.stop()).toEqual({ lost: false });
        await h.elapse(ttl + 50);
        await eventually("the older presence to lapse", async () => (await claimSettled(a, later, newOwner, { gate: true })).ok);
        expect(await a.leases.protocolFloor()).toBe(LEASE_PROTOCOL);
        expect(duty.ok && (await older.duties.get(duty.lease.key))?.live).toBe(true);
      } finally {
        await Promise.all(beats.map((hb) => hb.stop()));
        await older.close();
      }
    }, CASE_TIMEOUT_MS);

    test("duty leases keep their own TTL in their own bucket", async () => {
      const key = `worker:${uniq("scheduler")}`;
      const oa = owner("node-a");
      const long_ttl = ttl * 4;
      const d = await a.duties.acquire(key, { owner: oa, preferred: "node-a", ttl_ms: long_ttl });
      const lease = okLease(d);
      expect(lease.expires_at - lease.acquired_at).toBeGreaterThanOrEqual(long_ttl);
      expect(await b.leases.get(key)).toBeNull();
      expect(await b.duties.acquire(key, { owner: owner("node-b"), preferred: "node-b", ttl_ms: long_ttl })).toMatchObject({ ok: false, rule: "held" });
      await h.elapse(ttl + 50);
      expect((await a.duties.renew(key, oa, lease.epoch)).status).toBe("renewed");
      expect(await a.duties.release(key, oa, lease.epoch)).toBe("released");
      expect((await b.duties.list("worker:")).some((v) => v.key === key)).toBe(false);
      void DUTIES_BUCKET;
    }, CASE_TIMEOUT_MS);

    test("compare-and-set conflicts on every slot", async () => {
      for (const slotName of SLOT_NAMES) {
        const slot = a.slot(slotName);
        const peer = b.slot(slotName);
        const key = `${uniq(slotName)}:any key/ü`;
        const r1 = await slot.create(key, enc("one"));
        await rejectsCas(peer.create(key, enc("two")));
        const r2 = await peer.update(key, enc("two"), r1);
        expect(r2).toBeGreaterThan(r1);
        await rejectsCas(slot.update(key, enc("stale"), r1));
        expect(dec((await slot.get(key))!.value)).toBe("two");
        await rejectsCas(slot.delete(key, r1));
        await slot.delete(key, r2);
        expect(await peer.get(key)).toBeNull();
        expect(await slot.keys()).not.toContain(key);
        const r3 = await peer.create(key, enc("three"));
        expect(await slot.keys()).toContain(key);
        await rejectsCas(slot.purge(key, r2));
        await slot.purge(key, r3);
        expect(await slot.get(key)).toBeNull();
        const r4 = await slot.put(key, enc("four"));
        expect((await peer.get(key))?.revision).toBe(r4);
      }
    }, CASE_TIMEOUT_MS);

    test("removal markers are listed and purged through their own revision only", async () => {
      const slot = a.slot("status");
      const peer = b.slot("status");
      const gone = `${uniq("marker")}.gone`;
      const back = `${uniq("marker")}.back`;
      const kept = `${uniq("marker")}.kept`;
      const r1 = await slot.create(gone, enc("x"));
      await slot.delete(gone, r1);
      const r2 = await slot.create(back, enc("y"));
      await slot.purge(back, r2);
      await slot.create(kept, enc("z"));
      const markers = await peer.removals();
      const byKey = new Map(markers.map((m) => [m.key, m]));
      expect(byKey.get(gone)?.operation).toBe("delete");
      expect(byKey.get(back)?.operation).toBe("purge");
      expect(byKey.has(kept)).toBe(false);
      // `back` is written again after its marker was listed: that marker's purge touches nothing.
      const r3 = await peer.create(back, enc("again"));
      expect(await slot.purgeRemoval(back, byKey.get(back)!.revision)).toBe(false);
      expect(dec((await peer.get(back))!.value)).toBe("again");
      expect((await peer.get(back))!.revision).toBe(r3);
      // `gone`'s marker is purged: no longer listed, and the key can be created afresh.
      expect(await slot.purgeRemoval(gone, byKey.get(gone)!.revision)).toBe(true);
      expect((await peer.removals()).some((m) => m.key === gone)).toBe(false);
      expect(await slot.keys()).not.toContain(gone);
      await slot.create(gone, enc("new"));
      expect(dec((await peer.get(gone))!.value)).toBe("new");
    }, CASE_TIMEOUT_MS);

    test("watch sees every write, in order, with its revision and operation", async () => {
      const slot = a.slot("status");
      const prefix = uniq("watch");
      const seen: KvEntry[] = [];
      const w = await b.slot("status").watch((e) => seen.push(e), { key: `${prefix}.>` });
      try {
        const k1 = `${prefix}.node-1`;
        const k2 = `${prefix}.node-2`;
        const expected: { key: string; revision: number; operation: string; value: string }[] = [];
        const r1 = await slot.create(k1, enc("a"));
        expected.push({ key: k1, revision: r1, operation: "put", value: "a" });
        const r2 = await slot.put(k2, enc("b"));
        expected.push({ key: k2, revision: r2, operation: "put", value: "b" });
        const r3 = await slot.update(k1, enc("c"), r1);
        expected.push({ key: k1, revision: r3, operation: "put", value: "c" });
        await slot.delete(k2, r2);
        await slot.purge(k1);
        await eventually("five watch events", async () => seen.length >= 5);
        const firstThree = seen.slice(0, 3).map((e) => ({ key: e.key, revision: e.revision, operation: e.operation as string, value: dec(e.value) }));
        expect(firstThree).toEqual(expected);
        expect(seen.slice(3).map((e) => [e.key, e.operation])).toEqual([
          [k2, "delete"],
          [k1, "purge"],
        ]);
        expect(seen[3]!.revision).toBeGreaterThan(r3);
        expect(seen.length).toBe(5);
        // includeCurrent: current values first, then what follows.
        const current: KvEntry[] = [];
        const r5 = await slot.put(k2, enc("d"));
        const w2 = await a.slot("status").watch((e) => current.push(e), { key: `${prefix}.>`, includeCurrent: true });
        await eventually("the current value", async () => current.some((e) => e.revision === r5));
        const r6 = await slot.put(k2, enc("e"));
        await eventually("the next write", async () => current.some((e) => e.revision === r6));
        w2.stop();
        expect(current.filter((e) => e.operation === "put").map((e) => dec(e.value))).toEqual(["d", "e"]);
      } finally {
        w.stop();
      }
    }, CASE_TIMEOUT_MS);
  });
}
