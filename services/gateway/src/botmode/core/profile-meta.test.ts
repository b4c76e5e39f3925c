import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import {
  applyProfileMetaPatch,
  checkDescription,
  checkTitle,
  clonedLook,
  DESCRIPTION_MAX,
  defaultProfileMeta,
  effectiveAvatarSeed,
  mergePatch,
  metaAfterRename,
  profileMetaDocument,
  profileMetaView,
  readProfileMeta,
  TITLE_MAX,
  UI_META_MAX_BYTES,
} from "./profile-meta.js";

const ctx = { profile: "alice", section_ids: ["sec_clients", "sec_team"] };

describe("readProfileMeta", () => {
  it("reads an empty or missing file as the defaults", () => {
    expect(readProfileMeta({})).toEqual({ meta: defaultProfileMeta(), problems: [] });
    expect(defaultProfileMeta()).toEqual({
      display_name: null,
      hidden: false,
      section: null,
      avatar: { style: "blob", seed: null, locked: false, silhouette: null },
      ui_meta: {},
    });
  });

  it("reads every field", () => {
    const raw = {
      created_at: "2026-01-01T00:00:00.000Z",
      display_name: "  Ålice 🤖 ",
      hidden: true,
      section: "sec_team",
      avatar: { style: "geometric", seed: "x7", locked: true, silhouette: "cloud" },
      ui_meta: { groups: ["g1"], pinned: { at: 3 } },
    };
    expect(readProfileMeta(raw)).toEqual({
      meta: {
        display_name: "Ålice 🤖",
        hidden: true,
        section: "sec_team",
        avatar: { style: "geometric", seed: "x7", locked: true, silhouette: "cloud" },
        ui_meta: { groups: ["g1"], pinned: { at: 3 } },
      },
      problems: [],
    });
  });

  // One bad field reads as its default and is reported; the others are still read.
  it.each([
    [{ hidden: "yes" }, "hidden", "true or false"],
    [{ display_name: "" }, "display_name", "1-64 characters"],
    [{ display_name: "x".repeat(65) }, "display_name", "is 65 characters"],
    [{ display_name: "two\nlines" }, "display_name", "line break"],
    [{ display_name: 42 }, "display_name", "got number 42"],
    [{ section: "../etc" }, "section", "a section id matching"],
    [{ avatar: "blob" }, "avatar", "a mapping with style, seed, locked, silhouette"],
    [{ avatar: { style: "square" } }, "avatar.style", "one of blob, geometric, image"],
    [{ avatar: { seed: "s".repeat(129) } }, "avatar.seed", "at most 128 characters"],
    [{ avatar: { locked: 1 } }, "avatar.locked", "true or false"],
    [{ avatar: { silhouette: "star" } }, "avatar.silhouette", "one of round, organic, boxy, nub, cloud, sun"],
    [{ ui_meta: [1, 2] }, "ui_meta", "a JSON object"],
    [{ ui_meta: "text" }, "ui_meta", "a JSON object"],
  ])("%j: %s is reported and defaulted", (raw, field, hint) => {
    const { meta, problems } = readProfileMeta({ ...raw, display_name_kept: "other keys stay" });
    expect(problems).toHaveLength(1);
    expect(problems[0]!.field).toBe(field);
    expect(problems[0]!.message).toContain(`${field}: `);
    expect(problems[0]!.message).toContain(hint);
    expect(meta).toEqual(defaultProfileMeta());
  });

  it("keeps the valid fields next to invalid ones, and reports each invalid one", () => {
    const { meta, problems } = readProfileMeta({
      display_name: "Bob",
      hidden: "no",
      avatar: { style: "square", seed: "kept", silhouette: 7 },
    });
    expect(meta.display_name).toBe("Bob");
    expect(meta.hidden).toBe(false);
    expect(meta.avatar).toEqual({ style: "blob", seed: "kept", locked: false, silhouette: null });
    expect(problems.map((p) => p.field).sort()).toEqual(["avatar.silhouette", "avatar.style", "hidden"]);
  });

  it("reports a file that is not a mapping", () => {
    for (const raw of [[1, 2], "text", 3]) {
      const { meta, problems } = readProfileMeta(raw);
      expect(meta).toEqual(defaultProfileMeta());
      expect(problems[0]!.field).toBe("(top level)");
      expect(problems[0]!.message).toContain("must be a mapping of display_name, hidden, section, avatar, ui_meta");
    }
  });

  it("reports ui_meta over 16 KiB as payload_too_large", () => {
    const { problems } = readProfileMeta({ ui_meta: { blob: "x".repeat(UI_META_MAX_BYTES) } });
    expect(problems[0]).toMatchObject({ field: "ui_meta", reason: "payload_too_large" });
    expect(problems[0]!.message).toContain(`at most ${UI_META_MAX_BYTES} bytes`);
  });

  it("counts ui_meta in UTF-8 bytes of compact JSON", () => {
    // {"k":"…"} is 8 bytes of punctuation and key around the value.
    const fits = { k: "é".repeat((UI_META_MAX_BYTES - 8) / 2) };
    expect(readProfileMeta({ ui_meta: fits }).problems).toEqual([]);
    expect(readProfileMeta({ ui_meta: { k: `${fits.k}a` } }).problems[0]?.reason).toBe("payload_too_large");
  });
});

describe("profileMetaDocument", () => {
  it("leaves defaults out and keeps unknown keys and created_at", () => {
    const base = {
      created_at: "2026-01-01T00:00:00.000Z",
      future_field: { x: 1 },
      hidden: true,
      avatar: { style: "image", frame: "gold" },
    };
    const meta = { ...defaultProfileMeta(), display_name: "Al" };
    expect(profileMetaDocument(meta, base)).toEqual({
      created_at: "2026-01-01T00:00:00.000Z",
      future_field: { x: 1 },
      display_name: "Al",
      avatar: { frame: "gold" },
    });
  });

  it("round-trips through readProfileMeta", () => {
    const meta = {
      display_name: "Zoë",
      hidden: true,
      section: "sec_team",
      avatar: { style: "geometric" as const, seed: "s", locked: true, silhouette: "sun" as const },
      ui_meta: { a: [1, { b: null }] },
    };
    expect(readProfileMeta(profileMetaDocument(meta))).toEqual({ meta, problems: [] });
  });
});

describe("mergePatch (RFC 7396)", () => {
  it.each([
    [{ a: 1 }, { a: 2 }, { a: 2 }],
    [{ a: 1 }, { b: 2 }, { a: 1, b: 2 }],
    [{ a: 1, b: 2 }, { a: null }, { b: 2 }],
    [{ a: { x: 1, y: 2 } }, { a: { y: null, z: 3 } }, { a: { x: 1, z: 3 } }],
    [{ a: [1, 2] }, { a: [3] }, { a: [3] }],
    [{ a: 1 }, {}, { a: 1 }],
    [{ a: "x" }, { a: { b: 1 } }, { a: { b: 1 } }],
  ])("%j + %j = %j", (target, patch, result) => {
    expect(mergePatch(target, patch)).toEqual(result);
  });
});

describe("applyProfileMetaPatch", () => {
  const file = {
    created_at: "2026-01-01T00:00:00.000Z",
    display_name: "Alice",
    section: "sec_team",
    avatar: { style: "blob", seed: "r1" },
    ui_meta: { desktop: { pinned: true }, groups: ["g1"] },
    from_a_newer_version: 1,
  };

  it("changes only the given fields", () => {
    const { document, meta, changed } = applyProfileMetaPatch(file, { hidden: true }, ctx);
    expect(changed).toEqual(["hidden"]);
    expect(meta).toMatchObject({ display_name: "Alice", hidden: true, section: "sec_team" });
    expect(document).toEqual({ ...file, hidden: true });
  });

  it.each([
    [{ display_name: null }, "display_name", undefined],
    [{ section: null }, "section", undefined],
    [{ avatar: null }, "avatar", undefined],
    [{ ui_meta: null }, "ui_meta", undefined],
  ])("%j clears %s to its default", (patch, field, stored) => {
    const { document, changed } = applyProfileMetaPatch(file, patch, ctx);
    expect(changed).toEqual([field]);
    expect(document[field]).toBe(stored);
    expect(document.created_at).toBe(file.created_at);
    expect(document.from_a_newer_version).toBe(1);
  });

  it("merges avatar and ui_meta key by key", () => {
    const { document, changed } = applyProfileMetaPatch(file, { avatar: { silhouette: "nub" }, ui_meta: { groups: null, mobile: 1 } }, ctx);
    expect(changed).toEqual(["avatar", "ui_meta"]);
    expect(document.avatar).toEqual({ seed: "r1", silhouette: "nub" });
    expect(document.ui_meta).toEqual({ desktop: { pinned: true }, mobile: 1 });
  });

  it("normalizes the display name it stores", () => {
    expect(applyProfileMetaPatch({}, { display_name: "  Zoe\u0308  " }, ctx).document.display_name).toBe("Zo\u00eb");
  });

  it("an empty patch changes nothing", () => {
    expect(applyProfileMetaPatch(file, {}, ctx)).toMatchObject({ changed: [], document: file });
  });

  it("moves a bot to another section, one section at a time", () => {
    const { meta, changed } = applyProfileMetaPatch(file, { section: "sec_clients" }, ctx);
    expect(meta.section).toBe("sec_clients");
    expect(changed).toEqual(["section"]);
  });

  it("refuses a section that does not exist, naming the sections", () => {
    const err = thrownHermesError(() => applyProfileMetaPatch(file, { section: "sec_gone" }, ctx));
    expect(err.reason).toBe("not_found");
    expect(err.message).toContain('section: "sec_gone" does not exist');
    expect(err.data).toMatchObject({ field: "section", sections: ["sec_clients", "sec_team"] });
  });

  it("drops a stale section left by a deleted section instead of refusing", () => {
    const { document, meta } = applyProfileMetaPatch({ ...file, section: "sec_deleted" }, { hidden: true }, ctx);
    expect(meta.section).toBeNull();
    expect(document.section).toBeUndefined();
  });

  // Each refusal names the field and what is valid there, and nothing is returned to write.
  it.each([
    [{ hidden: "yes" }, "invalid_params", 'hidden: must be true or false (got text "yes")'],
    [{ display_name: "" }, "invalid_params", "display_name: is empty; it must be text of 1-64 characters"],
    [{ display_name: "é".repeat(65) }, "invalid_params", "display_name: is 65 characters"],
    [{ avatar: { style: "square" } }, "invalid_params", "avatar.style: must be one of blob, geometric, image"],
    [{ avatar: { seed: 5 } }, "invalid_params", "avatar.seed: must be text of at most 128 characters"],
    [{ avatar: "x" }, "invalid_params", "avatar: must be a mapping with style, seed, locked, silhouette"],
    [{ ui_meta: [] }, "invalid_params", "ui_meta: must be a JSON object"],
    [
      { ui_meta: { big: "x".repeat(UI_META_MAX_BYTES) } },
      "payload_too_large",
      "bytes serialized; it must be a JSON object of at most 16384 bytes",
    ],
    [
      { colour: "red" },
      "invalid_params",
      "colour: is not a profile metadata field; the fields are display_name, hidden, section, avatar, ui_meta",
    ],
    [{ avatar: { shape: 1 } }, "invalid_params", "avatar.shape: is not an avatar field; the fields are style, seed, locked, silhouette"],
    [[{ hidden: true }], "invalid_params", "the update must be a mapping"],
    [null, "invalid_params", "the update must be a mapping"],
  ])("refuses patch %# (%s)", (patch, reason, message) => {
    const err = thrownHermesError(() => applyProfileMetaPatch(file, patch, ctx));
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
    expect(err.data.field).toBeDefined();
  });

  it("refuses to save over an invalid field it was not asked to change, and a patch can repair it", () => {
    const broken = { ...file, hidden: "maybe" };
    const err = thrownHermesError(() => applyProfileMetaPatch(broken, { display_name: "Al" }, ctx));
    expect(err.reason).toBe("invalid_config");
    expect(err.message).toContain("profile.yaml: hidden: must be true or false");
    expect(err.message).toContain("set hidden in this update (null resets it)");
    expect(applyProfileMetaPatch(broken, { hidden: null, display_name: "Al" }, ctx).meta).toMatchObject({
      hidden: false,
      display_name: "Al",
    });
  });

  it("locking an unseeded face pins the seed to the profile name it is drawn from", () => {
    const { meta } = applyProfileMetaPatch({}, { avatar: { locked: true } }, ctx);
    expect(meta.avatar).toEqual({ style: "blob", seed: "alice", locked: true, silhouette: null });
  });

  it("locking a randomized face keeps its seed; a re-roll in the same patch wins", () => {
    expect(applyProfileMetaPatch(file, { avatar: { locked: true } }, ctx).meta.avatar.seed).toBe("r1");
    expect(applyProfileMetaPatch({}, { avatar: { locked: true, seed: "new" } }, ctx).meta.avatar.seed).toBe("new");
  });

  it("clearing the seed of a locked face pins it again to what it is drawn from before the change", () => {
    const locked = { avatar: { seed: "r1", locked: true } };
    expect(applyProfileMetaPatch(locked, { avatar: { seed: null } }, ctx).meta.avatar.seed).toBe("r1");
  });
});

describe("the face follows the name unless it is seeded or locked", () => {
  it("an unseeded face is drawn from the profile name", () => {
    expect(effectiveAvatarSeed(defaultProfileMeta(), "alice")).toBe("alice");
    expect(effectiveAvatarSeed({ ...defaultProfileMeta(), avatar: { ...defaultProfileMeta().avatar, seed: "r1" } }, "alice")).toBe("r1");
  });

  it("a rename keeps all metadata; a locked face hand-written without a seed is pinned to the old name", () => {
    const file = { display_name: "Bob", section: "sec_team", avatar: { locked: true }, other: 1 };
    expect(metaAfterRename(file, "bob")).toEqual({
      display_name: "Bob",
      section: "sec_team",
      avatar: { locked: true, seed: "bob" },
      other: 1,
    });
    const unlocked = { display_name: "Bob", hidden: true };
    expect(metaAfterRename(unlocked, "bob")).toBe(unlocked);
  });
});

describe("clonedLook (--clone-from)", () => {
  it("copies the face (seed pinned), style, silhouette, lock and section; not name, hidden or ui_meta", () => {
    const source = {
      display_name: "Alice",
      hidden: true,
      section: "sec_team",
      avatar: { style: "blob", silhouette: "boxy" },
      ui_meta: { groups: ["g1"] },
      created_at: "2026-01-01T00:00:00.000Z",
    };
    expect(clonedLook(source, "alice")).toEqual({ section: "sec_team", avatar: { seed: "alice", silhouette: "boxy" } });
    const look = readProfileMeta(clonedLook(source, "alice")).meta;
    expect(effectiveAvatarSeed(look, "alice-2")).toBe(effectiveAvatarSeed(readProfileMeta(source).meta, "alice"));
  });

  it("copies a randomized, locked geometric face as it is", () => {
    const source = { avatar: { style: "geometric", seed: "r9", locked: true } };
    expect(clonedLook(source, "alice")).toEqual({ avatar: { style: "geometric", seed: "r9", locked: true } });
  });
});

describe("profileMetaView", () => {
  it("fills in the display name and the face's seed, and hides a stale section", () => {
    const read = readProfileMeta({ section: "sec_deleted", hidden: "x" });
    expect(profileMetaView(read, "alice", ctx.section_ids)).toEqual({
      display_name: "alice",
      hidden: false,
      section: null,
      avatar: { style: "blob", seed: null, locked: false, silhouette: null, effective_seed: "alice" },
      ui_meta: {},
      problems: [expect.stringContaining("hidden: must be true or false")],
    });
  });
});

describe("title and description (config.yaml)", () => {
  it("accepts a one-line title up to the limit; null or blank clears it", () => {
    expect(checkTitle("  Research lead  ")).toBe("Research lead");
    expect(checkTitle("t".repeat(TITLE_MAX))).toHaveLength(TITLE_MAX);
    expect(checkTitle(null)).toBeNull();
    expect(checkTitle("   ")).toBeNull();
  });

  it.each([
    ["t".repeat(TITLE_MAX + 1), `title: is ${TITLE_MAX + 1} characters`],
    ["a\nb", "title: contains a line break"],
    [7, "title: must be text of 1-200 characters"],
  ])("refuses the title %j", (value, message) => {
    const err = thrownHermesError(() => checkTitle(value));
    expect(err.reason).toBe("invalid_params");
    expect(err.message).toContain(message);
    expect(err.data.field).toBe("title");
  });

  it("accepts a description of several lines up to the limit", () => {
    expect(checkDescription("Reads my inbox.\r\n\tSummarizes it.")).toBe("Reads my inbox.\n\tSummarizes it.");
    expect(checkDescription("d".repeat(DESCRIPTION_MAX))).toHaveLength(DESCRIPTION_MAX);
    expect(checkDescription("")).toBeNull();
  });

  it.each([
    ["d".repeat(DESCRIPTION_MAX + 1), `description: is ${DESCRIPTION_MAX + 1} characters`],
    ["bell\u0007", "description: contains a control character"],
    [["x"], "description: must be text of at most 2000 characters"],
  ])("refuses the description %j", (value, message) => {
    const err = thrownHermesError(() => checkDescription(value));
    expect(err.reason).toBe("invalid_params");
    expect(err.message).toContain(message);
  });
});
