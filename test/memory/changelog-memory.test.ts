// The memory changelog conformance suite on the in-memory twin the simulations use.
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { changelogConformance } from "../conformance/changelog.ts";

changelogConformance("in-memory twin", async () => {
  const log = new MemoryChangelog();
  return {
    a: log,
    b: log,
    putRaw: async (subject, data) => log.putRaw(subject, data),
    teardown: async () => undefined,
  };
});
