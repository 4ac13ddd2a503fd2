import { describe, expect, test } from "bun:test";
import { ConfigError, parseConfig } from "../../src/config/load.ts";

const SECRET = "x".repeat(32);

function problems(yaml: string, env: Record<string, string> = {}): { path: string; message: string }[] {
  try {
    parseConfig(yaml, "test.yaml", env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

// Each row: a shape the spec refuses, and the field the refusal must name.
const refusals: [string, string, string][] = [
  [
    "local coordination beside a clustered stream",
    `node: {id: a}\nstream: {cluster: {peers: ["127.0.0.1:6223", "127.0.0.1:6224"]}, replicas: 3}\n`,
    "coordination.type",
  ],
  ["local coordination beside an external stream", `node: {id: a}\nstream: {type: nats, url: "nats://127.0.0.1:4222"}\n`, "coordination.type"],
  [
    "local coordination on a leaf",
    `node: {id: a, roles: [seats]}\nstream: {leaf: {urls: ["nats://127.0.0.1:7422"]}}\n`,
    "coordination.type",
  ],
  [
    "a two-member fleet",
    `node: {id: a}\ncoordination: {type: embedded-kv}\nstream: {cluster: {peers: ["127.0.0.1:6223"]}}\n`,
    "stream.cluster.peers",
  ],
  ["replicas > 1 without peers", `stream: {replicas: 3}\n`, "stream.replicas"],
  [
    "a leaf with a cluster block",
    `node: {id: a, roles: [seats]}\ncoordination: {type: embedded-kv}\nstream: {leaf: {urls: ["nats://127.0.0.1:7422"]}, cluster: {peers: ["127.0.0.1:1", "127.0.0.1:2"]}}\n`,
    "stream.cluster",
  ],
  [
    "a leaf with the data role",
    `node: {id: a, roles: [data, seats]}\ncoordination: {type: embedded-kv}\nstream: {leaf: {urls: ["nats://127.0.0.1:7422"]}}\n`,
    "node.roles",
  ],
  ["ingress without data", `node: {roles: [ingress, seats]}\n`, "node.roles"],
  ["workers without data", `node: {roles: [workers]}\n`, "node.roles"],
  [
    "a cluster listener beyond loopback without a secret",
    `node: {id: a}\ncoordination: {type: embedded-kv}\nstream: {cluster: {host: 0.0.0.0, peers: ["10.0.0.2:6222", "10.0.0.3:6222"]}, replicas: 3}\n`,
    "stream.cluster.secret",
  ],
  ["a leaf listener beyond loopback without a secret", `stream: {leaf: {port: 7422, host: 0.0.0.0}}\nnode: {id: a}\n`, "stream.leaf.secret"],
  [
    "an unset node id on a clustered stream",
    `coordination: {type: embedded-kv}\nstream: {cluster: {peers: ["127.0.0.1:6223", "127.0.0.1:6224"]}, replicas: 3}\n`,
    "node.id",
  ],
  ["external nats without a url", `node: {id: a}\ncoordination: {type: embedded-kv}\nstream: {type: nats}\n`, "stream.url"],
  [
    "a leaf that names a replica count (the members decide replication)",
    `node: {id: a, roles: [seats]}\ncoordination: {type: embedded-kv}\nstream: {leaf: {urls: ["nats://127.0.0.1:7422"]}, replicas: 3}\n`,
    "stream.replicas",
  ],
];

describe("topology refusals", () => {
  for (const [name, yaml, path] of refusals) {
    test(name, () => {
      const found = problems(yaml);
      expect(found.map((p) => p.path)).toContain(path);
    });
  }
});

describe("accepted shapes", () => {
  const accepted: [string, string][] = [
    ["the empty file: a one-box company", ""],
    [
      "a clustered member with a secret",
      `node: {id: a}\ncoordination: {type: embedded-kv}\nstream: {cluster: {host: 0.0.0.0, secret: "${SECRET}", peers: ["10.0.0.2:6222", "10.0.0.3:6222"]}, replicas: 3, leaf: {port: 7422, host: 0.0.0.0, secret: "${SECRET}"}}\n`,
    ],
    [
      "a leaf running seats",
      `node: {id: leaf-1, roles: [seats]}\nstore: {scratch: true}\ncoordination: {type: embedded-kv}\nstream: {leaf: {urls: ["nats://127.0.0.1:7422"]}}\n`,
    ],
    ["external nats with embedded-kv", `node: {id: a}\ncoordination: {type: embedded-kv}\nstream: {type: nats, url: "nats://127.0.0.1:4222"}\n`],
  ];
  for (const [name, yaml] of accepted) {
    test(name, () => expect(problems(yaml)).toEqual([]));
  }
});

test("defaults: all four roles, node-0, 32 turns, loopback API", () => {
  const { config, nodeId } = parseConfig("", "x", {});
  expect(config.node.roles).toEqual(["data", "ingress", "seats", "workers"]);
  expect(nodeId).toBe("node-0");
  expect(config.node.max_concurrent).toBe(32);
  expect(config.api.host).toBe("127.0.0.1");
  expect(config.coordination).toEqual({ type: "local", lease_ttl_seconds: 45 });
});
