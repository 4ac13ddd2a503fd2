// crewlet schema: the JSON Schema of crewlet.yaml, for editors.
import { tierAJsonSchema } from "../config/json-schema.ts";

export function runSchema(): number {
  console.log(JSON.stringify(tierAJsonSchema(), null, 2));
  return 0;
}
