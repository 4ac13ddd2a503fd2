// The memory changelog conformance suite on real nats-servers: one member (R1) and a
// 3-member cluster (R3), where the stream's leader may be on another member than either
// client's connection.
import { JetStreamChangelog } from "../../src/memory/changelog.ts";
import { startNats } from "../support/nats.ts";
import { changelogConformance } from "../conformance/changelog.ts";

for (const members of [1, 3]) {
  changelogConformance(`jetstream (${members === 1 ? "single member, R1" : "3-member cluster, R3"})`, async () => {
    const nats = await startNats(members);
    const ncA = await nats.connect({ name: "changelog-a" });
    const ncB = await nats.connect({ name: "changelog-b" });
    const a = new JetStreamChangelog(ncA, members);
    const b = new JetStreamChangelog(ncB, members);
    await a.ensure();
    await b.ensure(); // a second node's boot: idempotent
    const js = ncA.jetstream();
    return {
      a,
      b,
      putRaw: async (subject, data) => void (await js.publish(subject, data)),
      async teardown() {
        await ncA.close();
        await ncB.close();
        await nats.stop();
      },
    };
  });
}
