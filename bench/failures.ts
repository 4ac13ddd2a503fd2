// bench/failures.ts — what one person's message costs when the model endpoint fails: the
// provider calls it made and the time from the person's post to the notice in their thread,
// per failure kind and wire, on real parts (nats-server queue, estate.db, an HTTP endpoint;
// test/agent/failure-rig.ts). Prints figures; never fails on time.
//   bun bench/failures.ts [--repeats 3]
// --repeats: runs per failure kind and wire (each figure is their median).
// Permanent kinds run with the production numbers. Transient kinds run with the rig's
// scaled-down redelivery (TEST_REDELIVERY) and retry budget, so the bench takes seconds;
// the production figure for them is printed beside as a computation from the constants.
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { FAILED_DELIVERIES_MAX, REDELIVERY_BASE_MS, REDELIVERY_MAX_MS } from "../src/agent/classify.ts";
import { MAX_ATTEMPTS, RETRY_BUDGET_MS } from "../src/agent/providers/http.ts";
import { startNats } from "../test/support/nats.ts";
import { FailureRig, TEST_REDELIVERY, type Wire } from "../test/agent/failure-rig.ts";
import { anthropicTextReply, startModelServer, type Reply } from "../test/agent/model-server.ts";

const { repeats: REPEATS } = benchArgs("failures", "[--repeats 3]", z.object({ repeats: countFlag(3, 100) }));
const server = startModelServer();
const nats = await startNats(1);

interface Kind {
  name: string;
  reply: (wire: Wire) => Reply;
  settings?: Record<string, unknown>;
  base_url?: string;
  production: boolean;
}

const err = (wire: Wire, status: number, type: string, message: string): Reply => ({
  status,
  json: wire === "openai" ? { error: { message, type } } : { type: "error", error: { type, message } },
});

const kinds: Kind[] = [
  { name: "401 bad key", reply: (w) => err(w, 401, "authentication_error", "invalid key"), production: true },
  { name: "404 wrong url", reply: (w) => err(w, 404, "not_found_error", "no such route"), production: true },
  { name: "200 not the wire", reply: () => ({ text: "<html>proxy login</html>" }), production: true },
  { name: "400 context", reply: (w) => err(w, 400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000 maximum"), production: true },
  { name: "500 always", reply: (w) => err(w, 500, "api_error", "internal"), settings: { retry_budget_seconds: 1 }, production: false },
  { name: "hung endpoint", reply: () => ({ hang: true }), settings: { first_byte_timeout_seconds: 0.5, retry_budget_seconds: 0 }, production: false },
  { name: "refused", reply: () => anthropicTextReply("never reached"), base_url: "http://127.0.0.1:9", settings: { retry_budget_seconds: 0 }, production: false },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

console.log(`# provider calls per failed message and time to the failure notice (${REPEATS} runs each, median)`);
for (const kind of kinds) {
  for (const wire of ["openai", "anthropic"] as Wire[]) {
    const calls: number[] = [];
    const notice_ms: number[] = [];
    let ended = "";
    for (let i = 0; i < REPEATS; i++) {
      const rig = await FailureRig.start(
        {
          wire,
          base_url: kind.base_url ?? server.url,
          api_keys: ["bench-key-000001"],
          settings: kind.settings,
          ...(kind.production ? { redelivery: { base_ms: REDELIVERY_BASE_MS, max_ms: REDELIVERY_MAX_MS, give_up_after: FAILED_DELIVERIES_MAX } } : {}),
        },
        nats,
      );
      await rig.attach("cto");
      server.script([kind.reply(wire)]);
      const t0 = performance.now();
      const { message_id, trigger } = await rig.ask("cto", "status?");
      // The notice as the person sees it: their thread, polled every 5 ms.
      const deadline = Date.now() + 120_000;
      while (!(await rig.estate.thread("general", message_id)).some((m) => m.author === "cto") && Date.now() < deadline) await Bun.sleep(5);
      notice_ms.push(performance.now() - t0);
      const end = await rig.ending("cto", message_id, trigger.event_id, 30_000);
      calls.push(server.requests.length);
      ended = `${end.where}${end.thread.some(([a]) => a === "cto") ? "+notice" : ""}`;
      await rig.stop(true);
    }
    const scale = kind.production ? "production numbers" : `scaled: zero jitter, NAK ${TEST_REDELIVERY.base_ms} ms doubling, give up after ${TEST_REDELIVERY.give_up_after} deliveries`;
    console.log(
      `failure="${kind.name}" wire=${wire} provider_calls_per_message=${median(calls)} time_to_notice_ms=${median(notice_ms).toFixed(0)} ended=${ended} (${scale})`,
    );
  }
}

// Production figures for a transient failure that never clears, from the constants.
let nak_ms = 0;
for (let d = 1; d < FAILED_DELIVERIES_MAX; d++) nak_ms += Math.min(REDELIVERY_MAX_MS, REDELIVERY_BASE_MS * 2 ** (d - 1));
console.log(
  `computed (production, transient forever): provider_calls_per_message<=${FAILED_DELIVERIES_MAX * MAX_ATTEMPTS} time_to_notice<=${((FAILED_DELIVERIES_MAX * RETRY_BUDGET_MS + nak_ms) / 60_000).toFixed(1)} min (${FAILED_DELIVERIES_MAX} deliveries × ${RETRY_BUDGET_MS / 1000} s budget + ${nak_ms / 1000} s of NAK delays); before issue 13: 100 calls, no notice`,
);
server.stop();
await nats.stop();
