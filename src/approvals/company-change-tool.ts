// propose_company_change: an agent proposes a hire or a changed goal. It is offered only to
// seats a `company_changes: true` approval rule covers, and that rule always parks it, so
// the change is made only when a person says yes: then the seat's holder runs it, and it
// becomes the fleet's company as a new revision (the same path as POST /config/revisions),
// which every node applies. A change that would make a bad company is refused naming its
// field, and nothing is written.
import type { Company } from "../config/company.ts";
import { applyCompanyChange, companyChangeSchema } from "../config/company-change.ts";
import { COMPANY_CHANGE_TOOL } from "../config/approvals.ts";
import { z } from "zod";
import { defineTool, type Tool } from "../agent/tools/contract.ts";

/** What the tool needs of the fleet's company revisions. */
export interface CompanyChangePort {
  /** The company the fleet runs now (its active revision), or null when none is readable. */
  current(): Promise<Company | null>;
  /** Makes `company` the fleet's company (a new revision, activated). */
  activate(company: Company): Promise<{ digest: string; epoch: number; changed: boolean }>;
}

export function companyChangeTool(port: CompanyChangePort): Tool {
  return defineTool({
    name: COMPANY_CHANGE_TOOL,
    description:
      "Propose a change to the company: hire (a new seat with a name, goal, optional unit and manager) or goal (the company's mission, target \"company\", or one seat's goal). A person approves it before it happens; you are woken with the decision.",
    input: z.strictObject({ change: companyChangeSchema, why: z.string().trim().min(1).max(2_000).describe("Why the company needs it") }),
    // It changes the whole fleet's company: never read-only, and it reaches every node.
    annotations: { readOnly: false, openWorld: true, estateWrite: false },
    run: async ({ change }) => {
      const current = await port.current();
      if (!current) return { content: "not changed: the fleet's company cannot be read right now; ask again later", is_error: true, reached: false };
      const next = applyCompanyChange(current, change);
      if (!next.ok) return { content: `not changed: ${next.error}`, is_error: true, reached: false };
      const out = await port.activate(next.company);
      return { content: JSON.stringify({ changed: out.changed, what: next.summary, revision: out.digest, epoch: out.epoch }), is_error: false, reached: true };
    },
  });
}
