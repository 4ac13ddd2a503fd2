// An exclusive lock on the store dir for the life of the process. The kernel drops a
// flock(2) when its holder dies, even on kill -9, so holding it proves that no earlier
// incarnation of this node is still running on this store: the proof that lets a
// restarted node take its own seats back without waiting out a lease TTL.
//
// The lock is taken before anything in the store is touched (a scratch store's wipe
// included): the store's files are the holder's alone.
import { dlopen, FFIType } from "bun:ffi";
import { chmodSync, closeSync, ftruncateSync, mkdirSync, openSync, readdirSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { NodeRefusal } from "./refusal.ts";

const LOCK_EX = 2;
const LOCK_NB = 4;
export const LOCK_FILE = "node.lock";
/** The store holds the estate, the API token and the sidecar's credentials: its owner's only. */
const STORE_DIR_MODE = 0o700;
const STORE_FILE_MODE = 0o600;
/** Group and other bits, which no file in a store should carry. */
const SHARED_BITS = 0o077;

let libc: { symbols: { flock: (fd: number, op: number) => number } } | null = null;
function flock(fd: number, op: number): number {
  libc ??= dlopen("libc.so.6", { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } }) as never;
  return libc!.symbols.flock(fd, op);
}

export class StoreLockedError extends NodeRefusal {
  constructor(dir: string) {
    super("store_locked", `store dir ${dir} is locked by another running crewlet process (give each process its own store.dir)`, { dir });
    this.name = "StoreLockedError";
  }
}

export interface StoreLock {
  path: string;
  release(): void;
}

/**
 * Tightens a store made by an older build (or under a looser umask): the dir to 0700 and
 * each top-level entry to its owner's bits only. Only the top level: the dir's own mode
 * already keeps everyone else out of what is beneath it.
 */
function tighten(dir: string): void {
  chmodSync(dir, STORE_DIR_MODE);
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const mode = statSync(path).mode & 0o777;
    if ((mode & SHARED_BITS) !== 0) chmodSync(path, mode & ~SHARED_BITS);
  }
}

export function lockStoreDir(dir: string): StoreLock {
  mkdirSync(dir, { recursive: true, mode: STORE_DIR_MODE });
  const path = join(dir, LOCK_FILE);
  const fd = openSync(path, "a+", STORE_FILE_MODE);
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    closeSync(fd);
    throw new StoreLockedError(dir);
  }
  tighten(dir);
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`);
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      closeSync(fd); // closing the last descriptor drops the flock
    },
  };
}
