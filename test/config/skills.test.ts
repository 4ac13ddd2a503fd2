// company.skills: the tool-skill source, parsed by zod; a bad one names its field.
import { expect, test } from "bun:test";
import { companySchema } from "../../src/config/company.ts";

test.each([
  ["absent: no source", {}, null, null],
  ["a space", { source: { space: "Engineering" } }, { space: "Engineering" }, null],
  ["a space with a '/'", { source: { space: "Eng/Skills" } }, null, "skills.source.space"],
  ["an empty space", { source: { space: "" } }, null, "skills.source.space"],
  ["an unknown key", { source: { space: "Engineering", pages: 3 } }, null, "skills.source"],
] as const)("%s", (_, skills, want, badField) => {
  const r = companySchema.safeParse({ name: "Acme", skills });
  if (badField === null) {
    expect(r.success).toBe(true);
    expect(r.data!.skills.source).toEqual(want);
  } else {
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path.join(".")).toBe(badField);
  }
});
