// What a JetStream cluster that is still forming answers. A boot step that meets one of
// these waits for quorum and asks again (Node.whileClusterForms); anything else is a real
// failure.

/** 503 is "no responders", which a restarted member answers for an asset whose leader it has not
 * learned yet. */
const CLUSTER_FORMING = /TIMEOUT|\b503\b|no responders|no suitable peers for placement|temporarily unavailable|waiting for the members/i;
/** Whether `err` is what a cluster still forming answers: worth asking again, not a failure. */
export function isClusterForming(err: unknown): boolean {
  return CLUSTER_FORMING.test(`${(err as { code?: string }).code ?? ""} ${(err as Error).message ?? String(err)}`);
}
