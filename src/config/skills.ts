// company.skills: where the fleet's tool skills come from (spec: Seat Ownership § Singleton
// duties — "the tool-skill walks"). A tool skill is a knowledge page under the source space:
// its title names it, its body is what the prompt carries (src/agent/tool-skills.ts reads
// them; every node keeps its own registry, so no duty is involved).
import { z } from "zod";

export const skillsSchema = z
  .strictObject({
    source: z
      .strictObject({
        // As a unit's space names one (company.ts); the estate refuses a key it cannot hold.
        space: z.string().min(1, "is empty").regex(/^[^/\s][^/]*$/, "holds no '/' and starts with no space").describe("The knowledge space whose pages are the tool skills"),
      })
      .nullable()
      .default(null)
      .describe("Where tool skills come from; null: none"),
  })
  .default({ source: null });
export type SkillsSettings = z.infer<typeof skillsSchema>;
