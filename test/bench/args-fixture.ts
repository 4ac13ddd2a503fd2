// A bench's command line in a process of its own, for args.test.ts: prints "ran" only when
// benchArgs accepted argv.
import { z } from "zod";
import { benchArgs, countFlag, numberListFlag } from "../../bench/args.ts";

benchArgs("t", "[--seats 10]", z.object({ seats: countFlag(10, 100), join: numberListFlag("0,0", z.number().nonnegative()) }));
console.log("ran");
