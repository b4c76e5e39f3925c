import { describe, expect, it } from "vitest";
import { localTurn } from "../../agents/core/local-provider.js";
import { canonicalJson } from "./canonical-json.js";
import { MAX_TEXT_BYTES } from "./limits.js";
import {
  checkMemberTurnRequest,
  fitReply,
  type MemberTurnRequest,
  roomChatMessages,
  roomTurnPrompt,
  transcriptMessage,
  transcriptWindow,
} from "./member-turn.js";
import type { EventKind, RoomEvent } from "./types.js";

const members = [
  { member_id: "alice", profile: "alice", display_name: "Alice" },
  { member_id: "bob@gw-b", profile: "bob", gateway_id: "gw-b" },
];

function event(seq: number, kind: EventKind, actor: Record<string, unknown>, payload: Record<string, unknown>): RoomEvent {
  return {
    room_id: "r",
    seq,
    event_id: `e${seq}`,
    kind,
    actor_json: canonicalJson(actor),
    epoch: 1,
    payload_json: canonicalJson(payload),
    created_at: "2026-01-01T00:00:00.000Z",
    hash: "",
  };
}

const user = (seq: number, text: string) => event(seq, "message.user", { kind: "user", id: "user" }, { text });
const member = (seq: number, id: string, text: string) => event(seq, "message.member", { kind: "member", id }, { text, turn_id: "t" });

function request(overrides: Partial<MemberTurnRequest> = {}): MemberTurnRequest {
  return {
    room_id: "r",
    room_name: "Planning",
    authority: { gateway_id: "gw-a", epoch: 1 },
    turn_id: "d2.r0.p0.s2.mabc",
    member: members[0]!,
    members,
    seen_through_seq: 2,
    transcript: [{ seq: 2, event_id: "e2", author_kind: "user", author_id: "user", text: "hello" }],
    ...overrides,
  };
}

describe("transcript window", () => {
  it("keeps messages only, up to the seen point, oldest first", () => {
    const events = [
      event(1, "room.created", { kind: "system", id: "room-control" }, { name: "x", members }),
      user(2, "hi all"),
      event(3, "turn.started", { kind: "gateway", id: "gw" }, {}),
      member(4, "alice", "hello"),
      user(5, "too new"),
    ];
    expect(transcriptWindow(events, 4).map((m) => [m.seq, m.author_kind, m.author_id, m.text])).toEqual([
      [2, "user", "user", "hi all"],
      [4, "member", "alice", "hello"],
    ]);
    expect(transcriptMessage(events[2]!)).toBeUndefined();
  });

  it("is bounded by count and bytes, keeping the newest (always at least one)", () => {
    const events = Array.from({ length: 100 }, (_, i) => user(i + 1, `m${i + 1}`));
    expect(transcriptWindow(events, 100, { max_messages: 3 }).map((m) => m.text)).toEqual(["m98", "m99", "m100"]);
    const big = [user(1, "a".repeat(100)), user(2, "b".repeat(100)), user(3, "c".repeat(300))];
    expect(transcriptWindow(big, 3, { max_bytes: 250 }).map((m) => m.seq)).toEqual([3]);
    expect(transcriptWindow(big, 3, { max_bytes: 400 }).map((m) => m.seq)).toEqual([2, 3]);
  });
});

describe("the room as the member's model reads it", () => {
  it("own replies are assistant messages; others are user messages named by handle, members with a [Name] prefix", () => {
    const msgs = roomChatMessages(
      request({
        transcript: [
          { seq: 2, event_id: "e2", author_kind: "user", author_id: "user", text: "plan the trip" },
          { seq: 4, event_id: "e4", author_kind: "member", author_id: "alice", text: "I can do May" },
          { seq: 6, event_id: "e6", author_kind: "member", author_id: "bob@gw-b", text: "@alice June?" },
        ],
      }),
    );
    expect(msgs).toEqual([
      { role: "user", content: "plan the trip", name: "user" },
      { role: "assistant", content: "I can do May" },
      { role: "user", content: "[bob] @alice June?", name: "bob" },
    ]);
  });

  it("works with the local provider's room rules: it answers when addressed and passes otherwise", () => {
    const persona = { display_name: "Alice", handle: "alice" };
    const turn = (text: string, author: "user" | "bob@gw-b" = "user") =>
      localTurn(persona, {
        model: "local",
        system_prompt: "",
        turn_kind: "room",
        messages: roomChatMessages(
          request({
            transcript: [{ seq: 2, event_id: "e2", author_kind: author === "user" ? "user" : "member", author_id: author, text }],
          }),
        ),
      });
    expect(turn("hello everyone")).toMatchObject({ kind: "text", text: expect.stringContaining("Alice here") });
    expect(turn("@bob only you")).toEqual({ kind: "text", text: "(pass)" });
    expect(turn("@alice what do you think?", "bob@gw-b")).toMatchObject({ kind: "text", text: expect.not.stringMatching(/^\(pass\)$/) });
  });

  it("the room prompt names the room, the other members, how to pass and how to call the human", () => {
    const prompt = roomTurnPrompt(request());
    expect(prompt).toContain('## Group room "Planning"');
    expect(prompt).toContain("You are @alice");
    expect(prompt).toContain("- bob (@bob)");
    expect(prompt).not.toContain("(@alice)");
    expect(prompt).toContain("(pass)");
    expect(prompt).toContain("@user");
  });
});

describe("member turn requests at the edge", () => {
  it("accepts a well-formed request and drops unknown fields", () => {
    const checked = checkMemberTurnRequest({ ...request(), extra: 1 });
    expect(checked).toMatchObject({ ok: true, value: { room_id: "r", member: { member_id: "alice" } } });
  });

  it("refuses bad shapes, ids, members and sizes with the field named", () => {
    const bad: [unknown, string][] = [
      [null, "request"],
      [{ ...request(), room_id: "has space" }, "room_id"],
      [{ ...request(), turn_id: "" }, "turn_id"],
      [{ ...request(), authority: { gateway_id: "gw", epoch: 0 } }, "authority.epoch"],
      [{ ...request(), member: { member_id: "zed", profile: "zed" } }, "member"],
      [{ ...request(), members: [members[0]] }, "members"],
      [
        { ...request(), transcript: [{ seq: 1, event_id: "e", author_kind: "robot", author_id: "x", text: "" }] },
        "transcript.0.author_kind",
      ],
      [
        {
          ...request(),
          transcript: [{ seq: 1, event_id: "e", author_kind: "user", author_id: "x", text: "x".repeat(MAX_TEXT_BYTES + 1) }],
        },
        "transcript",
      ],
    ];
    for (const [raw, field] of bad) {
      const checked = checkMemberTurnRequest(raw);
      expect(checked.ok, field).toBe(false);
      if (!checked.ok) expect(checked.field).toBe(field);
    }
  });
});

describe("replies", () => {
  it("fit the 64 KiB message limit, cut at a code point and marked", () => {
    expect(fitReply("short")).toBe("short");
    const long = "é".repeat(MAX_TEXT_BYTES);
    const fitted = fitReply(long);
    expect(Buffer.byteLength(fitted)).toBeLessThanOrEqual(MAX_TEXT_BYTES);
    expect(fitted.endsWith("… [truncated]")).toBe(true);
    expect(fitted.includes("\uFFFD")).toBe(false);
  });
});
