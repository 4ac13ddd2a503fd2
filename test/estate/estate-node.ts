// A data node's estate in its own process, so a test can kill -9 it mid-stream.
// argv: <nats url> <store dir> <node id> <replicas>. Prints "ready" once started.
import { connect } from "nats";
import { systemClock } from "../../src/clock.ts";
import { openEstate } from "../../src/estate/estate.ts";
import { createLogger, streamSink } from "../../src/log.ts";
import { testCompany } from "./support.ts";

const [url, dir, nodeId, replicas] = process.argv.slice(2);
if (!url || !dir || !nodeId || !replicas) throw new Error("usage: estate-node.ts <nats url> <store dir> <node id> <replicas>");
const nc = await connect({ servers: url, reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
const estate = openEstate({
  nc,
  storeDir: dir,
  replicas: Number(replicas),
  nodeId,
  roles: ["data"],
  company: testCompany(),
  clock: systemClock,
  log: createLogger({ level: "error", sinks: [streamSink(2, "text")] }),
  dataNodes: () => [nodeId],
  tuning: { check_interval_ms: 200 },
});
await estate.start();
console.log("ready");
process.on("SIGTERM", () => void estate.stop().then(() => process.exit(0)));
