// A node that must not start: the operator's setup is wrong (the store is another
// process's, the node id is in use), not the node. `crewlet run` exits 2 for these, like a
// bad config, so a supervisor that restarts failures (exit 1) does not loop on them.
export class NodeRefusal extends Error {
  constructor(
    /** The log event naming the rule, e.g. node_id_in_use. */
    readonly event: string,
    message: string,
    readonly fields: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "NodeRefusal";
  }
}
