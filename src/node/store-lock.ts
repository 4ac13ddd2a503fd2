// An exclusive lock on the store dir for the life of the process. The kernel drops a
// flock(2) when its holder dies, even on kill -9, so holding it proves that no earlier
// incarnation of this node is still running on this store: the proof that lets a
// restarted node take its own seats back without waiting out a lease TTL.
import { dlopen, FFIType } from "bun:ffi";
import { closeSync, mkdirSync, openSync, writeSync, ftruncateSync } from "node:fs";
import { join } from "node:path";

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_FILE = "node.lock";

let libc: { symbols: { flock: (fd: number, op: number) => number } } | null = null;
function flock(fd: number, op: number): number {
  libc ??= dlopen("libc.so.6", { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } }) as never;
  return libc!.symbols.flock(fd, op);
}

export class StoreLockedError extends Error {
  constructor(dir: string) {
    super(`store dir ${dir} is locked by another running crewlet process`);
    this.name = "StoreLockedError";
  }
}

export interface StoreLock {
  path: string;
  release(): void;
}

export function lockStoreDir(dir: string): StoreLock {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, LOCK_FILE);
  const fd = openSync(path, "a+");
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    closeSync(fd);
    throw new StoreLockedError(dir);
  }
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
