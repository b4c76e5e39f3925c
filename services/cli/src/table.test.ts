import { describe, expect, it } from "vitest";
import { displayWidth, table } from "./table.js";

describe("displayWidth", () => {
  it("counts terminal columns, not UTF-16 units", () => {
    expect(displayWidth("Clients")).toBe(7);
    expect(displayWidth("café")).toBe(4);
    expect(displayWidth("cafe\u0301")).toBe(4); // e + combining acute accent
    expect(displayWidth("ｇｗ２")).toBe(6); // fullwidth letters and digit
    expect(displayWidth("会議")).toBe(4);
    expect(displayWidth("🚀")).toBe(2);
    expect(displayWidth("👩‍💻")).toBe(2); // one ZWJ sequence
    expect(displayWidth("❤️")).toBe(2); // text pictograph + VS16
    expect(displayWidth("©")).toBe(1); // a pictograph drawn as text
    expect(displayWidth("")).toBe(0);
  });
});

describe("table", () => {
  it("lines columns up when cells hold emoji, fullwidth or combining letters", () => {
    const text = table(
      ["NAME", "BOTS"],
      [
        ["Équipe ｇｗ２ 🚀", "bob"],
        ["Clients", "alice"],
        ["cafe\u0301 👩‍💻", "carol"],
      ],
    );
    const lines = text.split("\n");
    // Every cell of the last column starts at the same terminal column.
    const starts = lines.map((line) => displayWidth(line.slice(0, line.lastIndexOf(" ") + 1)));
    expect(new Set(starts).size).toBe(1);
    expect(lines[0]).toBe(`NAME${" ".repeat(14)}BOTS`); // "Équipe ｇｗ２ 🚀" is 16 columns
  });

  it("leaves plain ASCII tables as they were", () => {
    expect(table(["A", "B"], [["xyz", 1]])).toBe("A    B\nxyz  1");
  });
});
