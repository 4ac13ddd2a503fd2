// Tests that open coordination or queues on a cluster that formed (or a member that
// rejoined) a moment ago meet what a node meets at boot: a stream info unanswered while a
// new meta leader settles (clean-clone CI runs: one TIMEOUT in 2 s, once in the R3
// conformance suite and once on a member swapped back in; later an R3 stream create
// unanswered within the API's 10 s, twice in one run of test/queue/jetstream.test.ts on a
// loaded box — the create may still land, and asking again finds it). A node waits that out
// (Node.whileClusterForms, by the same rule); a test asks again the same way, bounded.
import { isClusterForming } from "../../src/broker/forming.ts";

/** Tries and the pause between them: 5 s in all, well past a meta election on a loaded box. */
const ATTEMPTS = 10;
const PAUSE_MS = 500;

export async function whileForming<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= ATTEMPTS || !isClusterForming(err)) throw err;
      await Bun.sleep(PAUSE_MS);
    }
  }
}
