// The state-log trim and snapshot repair on one nats-server, R1 logs (see trim-scenario.ts).
import { trimScenario } from "./trim-scenario.ts";

trimScenario(1);
