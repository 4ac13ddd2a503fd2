import { expect, test } from "bun:test";
import { judgePosture, ROUTE_VIEW_STALE_MS, type PostureFacts } from "../../src/node/posture.ts";

const base: PostureFacts = { data: true, in_service: true, behind: false, route_view_unread_ms: 0 };
const rows: [string, Partial<PostureFacts>, { behind: boolean; withdrawn: boolean }][] = [
  ["a level data node claims and keeps its seats", {}, { behind: false, withdrawn: false }],
  ["a data node catching up keeps its seats and claims none", { behind: true }, { behind: true, withdrawn: false }],
  ["a sound copy answers without the view, whatever the view says", { route_view_unread_ms: ROUTE_VIEW_STALE_MS * 10 }, { behind: false, withdrawn: false }],
  ["a wrong copy keeps its seats while the view is readable", { in_service: false, behind: true }, { behind: false, withdrawn: false }],
  ["a wrong copy with the view unread past the bound cannot route: withdrawn", { in_service: false, route_view_unread_ms: ROUTE_VIEW_STALE_MS + 1 }, { behind: false, withdrawn: true }],
  ["a node without data routes while the view is fresh", { data: false, in_service: false }, { behind: false, withdrawn: false }],
  ["a node without data at exactly the bound is not yet withdrawn", { data: false, route_view_unread_ms: ROUTE_VIEW_STALE_MS }, { behind: false, withdrawn: false }],
  ["a node without data past the bound is withdrawn", { data: false, route_view_unread_ms: ROUTE_VIEW_STALE_MS + 1 }, { behind: false, withdrawn: true }],
];

for (const [name, facts, want] of rows) {
  test(name, () => expect(judgePosture({ ...base, ...facts })).toEqual(want));
}
