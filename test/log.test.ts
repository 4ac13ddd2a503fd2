import { expect, test } from "bun:test";
import { formatJson, memoryLogger } from "../src/log.ts";

test("every line carries its event name and redacts secret fields", () => {
  const { log, sink } = memoryLogger();
  log.child({ node: "node-a" }).info("api_listening", { url: "http://127.0.0.1:7700", token: "s3cret-s3cret", nested: { api_key: "k" } });
  const line = sink.lines[0]!;
  expect(line.event).toBe("api_listening");
  const text = formatJson(line);
  expect(text).toContain('"event":"api_listening"');
  expect(text).toContain('"node":"node-a"');
  expect(text).not.toContain("s3cret");
  expect(text).not.toContain('"k"');
});

test("lines below the level are dropped", () => {
  const { log, sink } = memoryLogger("warn");
  log.info("seat_sweep");
  log.warn("seat_admission_stale");
  expect(sink.lines.map((l) => l.event)).toEqual(["seat_admission_stale"]);
});

test("token counts are not secrets; token text is", () => {
  const { log, sink } = memoryLogger();
  log.info("turn_completed", { tokens: { input: 12, output: 7 }, api_keys: ["sk-1"], token: "abc" });
  const text = formatJson(sink.lines[0]!);
  expect(text).toContain('"input":12');
  expect(text).not.toContain("sk-1");
  expect(text).not.toContain('"abc"');
});
