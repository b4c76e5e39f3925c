import { describe, expect, it } from "vitest";
import { BatchAnswer, type JsonRpcResponse } from "./json-rpc.js";

const request = (id: number, method = "groups.log") => ({ jsonrpc: "2.0", id, method, params: {} });
const result = (id: number, bytes: number): JsonRpcResponse => ({ jsonrpc: "2.0", id, result: { text: "x".repeat(bytes) } });

describe("BatchAnswer", () => {
  it("keeps answers while they fit and replaces the rest with payload_too_large, never over the limit", () => {
    const limit = 12_000;
    const requests = Array.from({ length: 20 }, (_, i) => request(i + 1));
    const batch = BatchAnswer.plan(requests, limit)!;
    let done = false;
    requests.forEach((r, i) => {
      done = batch.add(i, result(r.id, 3000));
    });
    expect(done).toBe(true);
    const text = batch.text()!;
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(limit);
    const answers = JSON.parse(text) as {
      id: number;
      result?: unknown;
      error?: { code: number; data: { reason: string; limit: number } };
    }[];
    expect(answers.map((a) => a.id)).toEqual(requests.map((r) => r.id));
    expect(answers.filter((a) => a.result)).toHaveLength(2);
    for (const a of answers.filter((x) => x.error))
      expect(a.error).toMatchObject({ code: 4112, data: { reason: "payload_too_large", limit } });
  });

  it("still answers every call when the first answers are huge, and counts UTF-8 bytes", () => {
    const batch = BatchAnswer.plan([request(1), request(2), request(3)], 2000)!;
    batch.add(0, { jsonrpc: "2.0", id: 1, result: { text: "é".repeat(900) } }); // 1800 bytes: too large with the others' errors
    batch.add(1, result(2, 10));
    batch.add(2, result(3, 10_000_000));
    const answers = JSON.parse(batch.text()!) as { id: number; error?: { data: { reason: string } } }[];
    expect(answers.map((a) => [a.id, a.error?.data.reason ?? "ok"])).toEqual([
      [1, "payload_too_large"],
      [2, "ok"],
      [3, "payload_too_large"],
    ]);
  });

  it("gives notifications no entry and sends nothing when only notifications were sent", () => {
    const batch = BatchAnswer.plan([{ jsonrpc: "2.0", method: "groups.capabilities" }], 1000)!;
    expect(batch.add(0, null)).toBe(true);
    expect(batch.text()).toBeNull();
  });

  it("refuses up front a batch whose ids alone would not fit", () => {
    const long = { jsonrpc: "2.0", id: "i".repeat(600), method: "groups.log" };
    expect(BatchAnswer.plan([long, long], 1000)).toBeNull();
  });
});
