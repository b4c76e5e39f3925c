import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson, NotJsonError, utf8Bytes } from "./canonical-json.js";

describe("canonicalJson", () => {
  it("sorts keys at every depth and writes no whitespace", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: true, y: null }], c: "x" } })).toBe('{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}');
  });

  it("sorts by UTF-16 code units, not locale", () => {
    expect(canonicalJson({ b: 1, B: 2, é: 3, a: 4, _: 5 })).toBe('{"B":2,"_":5,"a":4,"b":1,"é":3}');
  });

  it("drops undefined members like JSON.stringify, and writes undefined array items as null", () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    expect(canonicalJson([undefined, 1])).toBe("[null,1]");
  });

  it("escapes strings as JSON does and keeps non-ASCII text as is", () => {
    expect(canonicalJson({ t: 'quote " backslash \\ newline \n ☃' })).toBe('{"t":"quote \\" backslash \\\\ newline \\n ☃"}');
  });

  it("refuses values JSON cannot hold", () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(NotJsonError);
    expect(() => canonicalJson({ n: Number.POSITIVE_INFINITY })).toThrow(/\$\.n is Infinity/);
    expect(() => canonicalJson({ n: 1n })).toThrow(NotJsonError);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(NotJsonError);
  });

  it("is stable under a JSON round trip and independent of key insertion order", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const once = canonicalJson(value);
        expect(canonicalJson(JSON.parse(once))).toBe(once);
        expect(canonicalJson(JSON.parse(JSON.stringify(value)))).toBe(once);
      }),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.integer()), (record) => {
        const reversed = Object.fromEntries(Object.entries(record).reverse());
        expect(canonicalJson(reversed)).toBe(canonicalJson(record));
      }),
    );
  });

  it("counts UTF-8 bytes", () => {
    expect(utf8Bytes("abc")).toBe(3);
    expect(utf8Bytes("é")).toBe(2);
    expect(utf8Bytes("☃")).toBe(3);
    expect(utf8Bytes("😀")).toBe(4);
  });
});
