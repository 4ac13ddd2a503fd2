// The agent engine's public surface, for the node's composition root.
export { TurnEngine, MAX_ROUNDS, type TurnEngineOptions, type TurnRequest, type TurnReport, type SeatTurnStatus } from "./turn.ts";
export { SeatInbox, Semaphore, type InboxOptions, type Posture, type SeatTurnGrant } from "./inbox.ts";
export { CompletionLedger, LEDGERED_TYPES, isLedgered, workKeyOf, eventKey, chatMessageKey } from "./ledger.ts";
export { McpPool, SeatMcp } from "./mcp.ts";
export { mcpPrepareStep, mcpReleaseStep } from "./hooks.ts";
export { publishEventSink, MemoryEventSink, nullEventSink, type EventSink } from "./events.ts";
export { dispose, type TurnEndKind, type Disposition } from "./classify.ts";
export { buildProviders, probeProviders, withFallback, ProviderError, type Provider } from "./providers/index.ts";
export { Notifier, noticeText, causeOf, NOTICE_PREFIX, type TurnStop } from "./notice.ts";
export { builtinTools } from "./tools/builtins.ts";
export type { EstatePort, PublishPort } from "./tools/estate-port.ts";
export type { Tool, ToolAnnotations } from "./tools/contract.ts";
