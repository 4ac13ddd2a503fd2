#!/usr/bin/env bun
// crewlet: one executable for the whole company. One file per command under src/cli/.
import { UsageError } from "./cli/args.ts";

const HELP = `crewlet — an AI-agent company on hardware you own

Usage:
  crewlet run [crewlet.yaml]              start this node (first signal drains, second exits)
  crewlet validate [file] [--json]        check a config file; exit 1 when invalid
  crewlet version                         crewlet version, lease protocol, sidecar, arch
  crewlet schema                          JSON Schema of crewlet.yaml, for editors
  crewlet chat post <channel> <text>      post to a channel on a running node
  crewlet chat search <text>              ranked search of chat (--channel, --member for DMs)
  crewlet work list                       list work items on a running node
  crewlet work search <text>              ranked search of work items (--project, --status, --assignee)
  crewlet config list|show|apply|activate the fleet's company revisions on a running node
  crewlet schedules                       each schedule's next fire and last fire
  crewlet budgets                         each spend cap, its window's spend and reset
  crewlet agents pause|resume|stop <h>    a person's controls over a seat
  crewlet runs list|show|cancel [id]       the seats' coding runs on a running node
  crewlet approvals list|show|approve|reject [id]  calls agents parked for a person's yes
  crewlet turns [--day D] [--seat H] [--outcome O]  the turn ledger: a receipt per turn, with cost
  crewlet estate status                   this node's estate copy, per domain
  crewlet estate skip <domain> <pos> --reason TEXT
                                          pass over a log record no copy can apply
  crewlet --help                          this text

Exit codes: 0 clean, 1 runtime failure, 2 bad config or usage, 75 watchdog.
Talking to a running node: --url (or CREWLET_URL, default http://127.0.0.1:7700) and
--token (or CREWLET_TOKEN; a node prints the token it minted at first boot, and for a
node on this box the CLI reads it from .crewlet/api-token or $CREWLET_STORE/api-token).`;

/** Bad usage shares bad config's code: both are the operator's input, not a failure. */
const EXIT_USAGE = 2;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(HELP);
      return command === undefined ? EXIT_USAGE : 0;
    case "run":
      return (await import("./cli/run.ts")).runRun(rest);
    case "validate":
      return (await import("./cli/validate.ts")).runValidate(rest);
    case "version":
    case "--version":
      return (await import("./cli/version.ts")).runVersion(rest);
    case "schema":
      return (await import("./cli/schema.ts")).runSchema();
    case "chat":
      return (await import("./cli/chat.ts")).runChatCommand(rest);
    case "work":
      return (await import("./cli/work.ts")).runWorkCommand(rest);
    case "config":
      return (await import("./cli/config.ts")).runConfigCommand(rest);
    case "estate":
      return (await import("./cli/estate.ts")).runEstateCommand(rest);
    case "agents":
      return (await import("./cli/agents.ts")).runAgentsCommand(rest);
    case "budgets":
      return (await import("./cli/budgets.ts")).runBudgetsCommand(rest);
    case "schedules":
      return (await import("./cli/schedules.ts")).runSchedulesCommand(rest);
    case "runs":
      return (await import("./cli/runs.ts")).runRunsCommand(rest);
    case "approvals":
      return (await import("./cli/approvals.ts")).runApprovalsCommand(rest);
    case "turns":
      return (await import("./cli/turns.ts")).runTurnsCommand(rest);
    case "sandbox-supervise":
      return (await import("./cli/sandbox-supervise.ts")).runSandboxSupervise(rest);
    default:
      throw new UsageError(`unknown command "${command}" (see crewlet --help)`);
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`crewlet: ${err.message}`);
    process.exitCode = EXIT_USAGE;
  } else {
    console.error(`crewlet: ${(err as Error).stack ?? String(err)}`);
    process.exitCode = 1;
  }
}
