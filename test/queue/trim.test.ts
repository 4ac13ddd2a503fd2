// The trim's judgement (queue/trim.ts) against a port that records its purges: how far a
// mailbox is purged, from its ack floor and what its reader settled.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { isReplayable, MailTrim, REPLAYABLE_HEADER, TRIM_REPLAYABLE_WITHIN_MS } from "../../src/queue/trim.ts";

function trimWith(floor: () => number | Error) {
  const purges: { subject: string; below: number }[] = [];
  const clock = new FakeClock();
  const trim = new MailTrim(
    {
      ackFloor: async () => {
        const f = floor();
        if (f instanceof Error) throw f;
        return f;
      },
      purgeBelow: async (_stream, subject, below) => void purges.push({ subject, below }),
    },
    clock,
    silentLogger,
  );
  return { trim, purges, clock };
}

test.each([
  // [ack floor, highest seq the reader settled, purged below (null: no purge)]
  [10, 10, 11], // the usual: everything read and settled
  [7, 10, 8], // a message below 10 still unsettled: the floor decides
  [1_010, 10, 11], // a floor beyond the stream's end (a deaf seat's pointers): the reader's own settlements decide
  [0, 10, null], // nothing settled below the floor yet
] as const)("floor %p, settled up to %p: purged below %p", async (floor, settled, below) => {
  const { trim, purges } = trimWith(() => floor);
  trim.settled("S", "d", "crewlet.seats.01.x.inbox", settled);
  await trim.tick();
  expect(purges).toEqual(below === null ? [] : [{ subject: "crewlet.seats.01.x.inbox", below }]);
});

test("an unmoved floor costs no second purge; a failed read leaves the mailbox due", async () => {
  let floor: number | Error = 5;
  const { trim, purges } = trimWith(() => floor);
  trim.settled("S", "d", "subj", 5);
  await trim.tick();
  trim.settled("S", "d", "subj", 5);
  await trim.tick();
  expect(purges).toEqual([{ subject: "subj", below: 6 }]);
  floor = new Error("timeout");
  trim.settled("S", "d", "subj", 9);
  await trim.tick();
  floor = 9;
  await trim.tick(); // due again without a new settlement
  expect(purges).toEqual([
    { subject: "subj", below: 6 },
    { subject: "subj", below: 10 },
  ]);
  await trim.stop();
});

test("replayable mail alone (probes) waits TRIM_REPLAYABLE_WITHIN_MS for its trim; other mail settled meanwhile takes it along at once", async () => {
  let floor = 3;
  const { trim, purges, clock } = trimWith(() => floor);
  trim.settled("S", "d", "subj", 3, true);
  await trim.tick();
  await clock.advance(TRIM_REPLAYABLE_WITHIN_MS - 1);
  trim.settled("S", "d", "subj", 4, true);
  floor = 4;
  await trim.tick();
  expect(purges).toEqual([]);
  await clock.advance(1);
  await trim.tick();
  expect(purges).toEqual([{ subject: "subj", below: 5 }]);
  // A new wait starts with the next replayable settlement; a chat message ends it.
  trim.settled("S", "d", "subj", 5, true);
  await trim.tick();
  trim.settled("S", "d", "subj", 6);
  floor = 6;
  await trim.tick();
  expect(purges).toEqual([
    { subject: "subj", below: 5 },
    { subject: "subj", below: 7 },
  ]);
  await trim.stop();
});

test("the replayable header is found whatever its case", () => {
  expect(isReplayable({ [REPLAYABLE_HEADER]: "1" })).toBe(true);
  expect(isReplayable({ [REPLAYABLE_HEADER.toLowerCase()]: "1" })).toBe(true);
  expect(isReplayable({ "Crewlet-Probe": "x" })).toBe(false);
});
