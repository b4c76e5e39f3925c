import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { canonicalOrigin, originAllowed } from "./http.js";

function upgrade(origin: string | undefined, localAddress: string, localPort: number): IncomingMessage {
  return { headers: origin === undefined ? {} : { origin }, socket: { localAddress, localPort } } as unknown as IncomingMessage;
}

describe("originAllowed", () => {
  it("lets through clients without Origin and the daemon's own origin", () => {
    expect(originAllowed(upgrade(undefined, "127.0.0.1", 7441), [])).toBe(true);
    for (const own of ["http://127.0.0.1:7441", "http://localhost:7441", "http://[::1]:7441"]) {
      expect(originAllowed(upgrade(own, "127.0.0.1", 7441), [])).toBe(true);
    }
    expect(originAllowed(upgrade("http://192.168.1.5:7441", "::ffff:192.168.1.5", 7441), [])).toBe(true);
    expect(originAllowed(upgrade("http://[fe80::1]:7441", "fe80::1", 7441), [])).toBe(true);
  });

  it("refuses other pages, other ports and schemes, unless listed", () => {
    for (const other of ["http://evil.example", "http://127.0.0.1:7442", "https://127.0.0.1:7441", "null", "http://localhost:7441.evil"]) {
      expect(originAllowed(upgrade(other, "127.0.0.1", 7441), [])).toBe(false);
    }
    // localhost is the daemon's own only on loopback.
    expect(originAllowed(upgrade("http://localhost:7441", "192.168.1.5", 7441), [])).toBe(false);
    expect(originAllowed(upgrade("https://ops.example.com", "127.0.0.1", 7441), ["https://ops.example.com"])).toBe(true);
  });
});

describe("canonicalOrigin", () => {
  it("normalizes origins as browsers send them and refuses anything else", () => {
    expect(canonicalOrigin("HTTPS://Ops.Example.com:443/")).toBe("https://ops.example.com");
    expect(canonicalOrigin("http://127.0.0.1:8080")).toBe("http://127.0.0.1:8080");
    for (const bad of [
      "ops.example.com",
      "ftp://x.example",
      "https://x.example/app",
      "https://u:p@x.example",
      "https://x.example?q=1",
      "*",
    ]) {
      expect(canonicalOrigin(bad)).toBeUndefined();
    }
  });
});
