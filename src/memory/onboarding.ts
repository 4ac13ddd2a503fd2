// Onboarding: a seat's first turn runs an onboarding step once per seat, fleet-wide. The
// marker row (memory_onboarding) is the durable fact and travels with the seat's memory;
// the claim is the single-flight across processes (spec: "Upsert plus Onboarding.Claim, a
// cross-process single-flight claim"), so two nodes that both lack the marker — a seat
// moved while its first turn ran — cannot both run the step. Claims live in the fleet's
// crewlet_claims bucket; its one-day age only bounds space, because by then the marker has
// travelled and is what a holder checks first.
import { CasConflict, type KvSlot } from "../coord/contract.ts";

/** The one step today: read the seat's unit knowledge spaces before its first answer. */
export const ONBOARDING_STEP = "unit-knowledge";

export const onboardingClaimKey = (handle: string, step: string): string => `onboarding.${handle}.${step}`;

/**
 * True when this caller won the step for the seat (run it, then mark it); false when
 * somebody already claimed it. A store that cannot answer throws: the caller runs the turn
 * without onboarding and tries again at the next one.
 */
export async function claimOnboarding(slot: KvSlot, handle: string, step: string, claimant: string, at: number): Promise<boolean> {
  try {
    await slot.create(onboardingClaimKey(handle, step), new TextEncoder().encode(JSON.stringify({ claimant, at })));
    return true;
  } catch (err) {
    if (err instanceof CasConflict) return false;
    throw err;
  }
}
