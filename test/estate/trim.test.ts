// The state-log trim and snapshot repair on a 3-member cluster, R3 logs (see trim-scenario.ts).
import { trimScenario } from "./trim-scenario.ts";

trimScenario(3);
