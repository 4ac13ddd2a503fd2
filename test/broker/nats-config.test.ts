import { describe, expect, test } from "bun:test";
import { boundsConcurrentIo, liftsConsumerCap, MAX_CONCURRENT_IO, quote, renderNatsConfig } from "../../src/broker/nats-config.ts";
import { derivePassword, type LeafPlan, type MemberPlan } from "../../src/broker/plan.ts";

const base = {
  nodeId: "node-a",
  storeDir: "/var/lib/crewlet",
  client: { host: "127.0.0.1", port: 4222 },
  credential: { user: "crewlet", password: "pw" },
  monitorPort: 8222,
};
const single: MemberPlan = {
  kind: "member",
  ...base,
  jetstream: { max_mem_bytes: 256 * 1024 * 1024, max_file_bytes: 8 * 1024 ** 3, domain: "crewlet" },
  replicas: 1,
};
const clustered: MemberPlan = {
  ...single,
  cluster: { name: "fleet", host: "10.0.0.1", port: 6222, routes: ["10.0.0.1:6222", "10.0.0.2:6222", "nats-route://10.0.0.3:6222"], secret: "s3cr3t" },
  leafListener: { host: "0.0.0.0", port: 7422, secret: "leafy" },
  replicas: 3,
};
const leaf: LeafPlan = {
  kind: "leaf",
  ...base,
  nodeId: "leaf-1",
  leafRemotes: { urls: ["10.0.0.1:7422", "nats-leaf://10.0.0.2:7422"], secret: "leafy" },
  jetstreamDomain: "crewlet",
};

describe("quote", () => {
  const cases: [string, string][] = [
    ["plain", '"plain"'],
    ["/var/lib/crewlet/stream", '"/var/lib/crewlet/stream"'],
    ['a"b', '"a\\x22b"'],
    ["a\\b", '"a\\x5cb"'],
    ["$VAR", '"\\x24VAR"'],
    ["#not a comment", '"\\x23not a comment"'],
    ["line\nbreak", '"line\\x0abreak"'],
    ["é", '"\\xc3\\xa9"'],
    ["}{][", '"\\x7d\\x7b\\x5d\\x5b"'],
  ];
  for (const [input, want] of cases) {
    test(JSON.stringify(input), () => expect(quote(input)).toBe(want));
  }
});

describe("the per-stream consumer cap (2.15+) is lifted for the releases that have it", () => {
  const cases: [string | null, boolean][] = [
    ["2.15.2", true],
    ["2.15.0", true],
    ["2.16.1", true],
    ["3.0.0", true],
    ["2.14.10", false],
    ["2.9.10", false],
    [null, true],
  ];
  for (const [version, lifted] of cases) {
    test(`${String(version)} → ${lifted ? "limits { default_max_consumers: -1 }" : "no limits block"}`, () => {
      expect(liftsConsumerCap(version)).toBe(lifted);
      expect(renderNatsConfig(single, version).includes("limits { default_max_consumers: -1 }")).toBe(lifted);
      expect(boundsConcurrentIo(version)).toBe(lifted);
      expect(renderNatsConfig(single, version).includes(`max_concurrent_io: ${MAX_CONCURRENT_IO}`)).toBe(lifted);
    });
  }
});

describe("renderNatsConfig", () => {
  test("a single member: JetStream on store/stream with explicit limits and a domain, client on loopback with the boot credential", () => {
    const conf = renderNatsConfig(single);
    expect(conf).toContain('server_name: "node-a"');
    expect(conf).toContain('listen: "127.0.0.1:4222"');
    expect(conf).toContain('http: "127.0.0.1:8222"');
    expect(conf).toContain('store_dir: "/var/lib/crewlet/stream"');
    expect(conf).toContain(`max_mem: ${256 * 1024 * 1024}`);
    expect(conf).toContain(`max_file: ${8 * 1024 ** 3}`);
    expect(conf).toContain('domain: "crewlet"');
    expect(conf).toContain('users: [\n    { user: "crewlet", password: "pw" }\n  ]');
    // No supervisors' credential unless the plan carries one.
    expect(conf).not.toContain("crewlet-sandbox");
    expect(conf).not.toContain("cluster {");
    expect(conf).not.toContain("leafnodes {");
  });

  test("a clustered member: authenticated routes to its peers (not itself), its cluster name, a leafnode listener", () => {
    const conf = renderNatsConfig(clustered);
    const routePw = derivePassword("cluster", "s3cr3t");
    expect(conf).toContain('name: "fleet"');
    expect(conf).toContain('listen: "10.0.0.1:6222"');
    expect(conf).toContain(`password: "${routePw}"`);
    expect(conf).toContain(`"nats-route://route:${routePw}@10.0.0.2:6222"`);
    expect(conf).toContain(`"nats-route://route:${routePw}@10.0.0.3:6222"`);
    expect(conf).not.toContain("@10.0.0.1:6222");
    expect(conf).toContain('listen: "0.0.0.0:7422"');
    expect(conf).toContain(`password: "${derivePassword("leaf", "leafy")}"`);
    // The operator's secrets never reach the file, only their digests.
    expect(conf).not.toContain("s3cr3t");
    expect(conf).not.toContain("leafy");
  });

  test("a member behind NAT or a proxy advertises the address peers and leaves dial; none advertised by default", () => {
    expect(renderNatsConfig(clustered)).not.toContain("advertise");
    const conf = renderNatsConfig({
      ...clustered,
      cluster: { ...clustered.cluster!, advertise: "203.0.113.7:16222" },
      leafListener: { ...clustered.leafListener!, advertise: "nats-leaf://203.0.113.7:17422" },
    });
    expect(conf).toContain('advertise: "203.0.113.7:16222"');
    expect(conf).toContain('advertise: "203.0.113.7:17422"');
  });

  test("a leaf: JetStream off, remotes to every member, plain JetStream API mapped onto the members' domain", () => {
    const conf = renderNatsConfig(leaf);
    const pw = derivePassword("leaf", "leafy");
    expect(conf).toContain("jetstream: disabled");
    expect(conf).not.toContain("store_dir");
    expect(conf).toContain('default_js_domain: { "$G": "crewlet" }');
    expect(conf).toContain(`"nats-leaf://leaf:${pw}@10.0.0.1:7422"`);
    expect(conf).toContain(`"nats-leaf://leaf:${pw}@10.0.0.2:7422"`);
    expect(conf).not.toContain("cluster {");
  });

  test("the same plan renders the same text", () => {
    expect(renderNatsConfig(clustered)).toBe(renderNatsConfig(structuredClone(clustered)));
  });

  test("derived passwords differ by purpose and by secret", () => {
    expect(derivePassword("cluster", "x")).not.toBe(derivePassword("leaf", "x"));
    expect(derivePassword("cluster", "x")).not.toBe(derivePassword("cluster", "y"));
    expect(derivePassword("cluster", "x")).toMatch(/^[0-9a-f]{64}$/);
  });
});
