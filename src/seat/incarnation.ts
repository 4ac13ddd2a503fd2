// Who an owner string is. A lease owner is one process incarnation:
// `{node_id}:{store_id}.{random}`. The store id is minted once per store dir and kept in
// it, so an owner also says which store (and so which store lock) its process ran under.
// Holding that lock proves every earlier incarnation on the store dead; nothing proves a
// process with the same node id on ANOTHER store dead, so its leases are never taken over
// (two live processes with one node id would otherwise take each other's presence and
// seats, each bumping the other's epoch, for ever).
import { randomBytes } from "node:crypto";

export function mintOwner(node_id: string, store_id: string): string {
  return `${node_id}:${store_id}.${randomBytes(4).toString("hex")}`;
}

/** `{node_id}:{store_id}.` of an owner minted by mintOwner; null for an owner without one. */
export function lineageOf(owner: string): string | null {
  const colon = owner.lastIndexOf(":");
  const dot = owner.lastIndexOf(".");
  return colon >= 0 && dot > colon + 1 ? owner.slice(0, dot + 1) : null;
}

/**
 * The takeover rule of a process holding its store lock: a live lease is a dead
 * predecessor's when its owner is another incarnation on the same store. `legacy` also
 * admits owners an older build minted without a store id (`{node_id}:{random}`), for the
 * first boot of this build on a store an older build used.
 */
export function predecessorsOf(owner: string, opts: { legacy: boolean }): (other: string) => boolean {
  const lineage = lineageOf(owner);
  const node = owner.slice(0, owner.lastIndexOf(":") + 1);
  return (other) => {
    if (other === owner) return false;
    if (lineage !== null && other.startsWith(lineage)) return true;
    return opts.legacy && other.startsWith(node) && lineageOf(other) === null;
  };
}
