import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import {
  createSection,
  deleteSection,
  MAX_SECTIONS,
  moveSection,
  readSections,
  renameSection,
  reorderSections,
  resolveSection,
  type Section,
  sectionsDocument,
  sectionsView,
} from "./sections.js";

function ids(prefix = "sec_") {
  let n = 0;
  return () => `${prefix}${++n}`;
}

const three: Section[] = [
  { id: "sec_a", name: "Clients" },
  { id: "sec_b", name: "Team" },
  { id: "sec_c", name: "Écrivains" },
];

const order = (sections: readonly Section[]) => sections.map((s) => s.id);

describe("readSections (sections.yaml)", () => {
  it("a missing file is no sections", () => {
    expect(readSections({})).toEqual([]);
  });

  it("reads the list in order and keeps keys it does not know", () => {
    const raw = {
      sections: [
        { id: "sec_b", name: " Team ", collapsed: true },
        { id: "sec_a", name: "Clients" },
      ],
      version: 2,
    };
    const sections = readSections(raw);
    expect(sections).toEqual([
      { id: "sec_b", name: "Team", collapsed: true },
      { id: "sec_a", name: "Clients" },
    ]);
    expect(sectionsView(sections)).toEqual([
      { id: "sec_b", name: "Team", order: 0 },
      { id: "sec_a", name: "Clients", order: 1 },
    ]);
    expect(sectionsDocument(sections, raw)).toEqual({ version: 2, sections });
  });

  it.each([
    ["not a list", { sections: "Team" }, "sections.yaml: sections: must be a list of {id, name}"],
    ["a bad id", { sections: [{ id: "../x", name: "A" }] }, "sections.yaml: sections.0.id: must be an id matching"],
    ["no name", { sections: [{ id: "s1" }] }, "sections.yaml: sections.0.name: must be text of 1-64 characters"],
    ["a blank name", { sections: [{ id: "s1", name: " " }] }, "sections.yaml: sections.0.name: is empty"],
    [
      "an id twice",
      {
        sections: [
          { id: "s1", name: "A" },
          { id: "s1", name: "B" },
        ],
      },
      "sections.yaml: sections.1.id: s1 is used twice",
    ],
    [
      "a name twice",
      {
        sections: [
          { id: "s1", name: "A" },
          { id: "s2", name: "a" },
        ],
      },
      'sections.yaml: sections.1.name: a section named "A" already exists',
    ],
    [
      "too many",
      { sections: Array.from({ length: MAX_SECTIONS + 1 }, (_, i) => ({ id: `s${i}`, name: `S${i}` })) },
      "at most 100 sections",
    ],
  ])("refuses %s as invalid_config naming the entry", (_what, raw, message) => {
    const err = thrownHermesError(() => readSections(raw));
    expect(err.reason).toBe("invalid_config");
    expect(err.message).toContain(message);
  });
});

describe("createSection", () => {
  it("appends, or inserts at an index", () => {
    const first = createSection([], "Clients", ids());
    expect(first.section).toEqual({ id: "sec_1", name: "Clients" });
    const top = createSection(first.sections, "  Team  ", ids("new_"), 0);
    expect(top.sections).toEqual([{ id: "new_1", name: "Team" }, first.section]);
  });

  it.each([
    ["an empty name", "", "invalid_params", "name: is empty"],
    ["a long name", "n".repeat(65), "invalid_params", "name: is 65 characters"],
    ["a name with a line break", "a\nb", "invalid_params", "line break"],
    ["a duplicate name (any case)", "clients", "already_exists", 'a section named "Clients" already exists'],
    ["the Unassigned bucket's name", "unassigned", "invalid_name", '"Unassigned" is where bots in no section are listed'],
    ["not text", 3, "invalid_params", "name: must be text"],
  ])("refuses %s", (_what, name, reason, message) => {
    const err = thrownHermesError(() => createSection(three, name, ids()));
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
  });

  it("refuses an index outside the list and a full list", () => {
    expect(thrownHermesError(() => createSection(three, "New", ids(), 4)).message).toContain("index: must be a whole number from 0 to 3");
    const full = Array.from({ length: MAX_SECTIONS }, (_, i) => ({ id: `s${i}`, name: `S${i}` }));
    expect(thrownHermesError(() => createSection(full, "One more", ids())).reason).toBe("limit_exceeded");
  });

  it("never reuses an id", () => {
    expect(thrownHermesError(() => createSection(three, "New", () => "sec_a")).reason).toBe("internal");
  });
});

describe("renameSection", () => {
  it("renames by id or by name, keeping id and place", () => {
    const byId = renameSection(three, "sec_b", "Staff");
    expect(byId.sections).toEqual([three[0], { id: "sec_b", name: "Staff" }, three[2]]);
    expect(renameSection(three, "team", "Staff").sections).toEqual(byId.sections);
  });

  it("may change only the case of its own name", () => {
    expect(renameSection(three, "sec_b", "TEAM").section.name).toBe("TEAM");
  });

  it("refuses another section's name and an unknown section", () => {
    expect(thrownHermesError(() => renameSection(three, "sec_b", "CLIENTS")).reason).toBe("already_exists");
    const err = thrownHermesError(() => renameSection(three, "sec_zz", "X"));
    expect(err.reason).toBe("not_found");
    expect(err.message).toContain('section "sec_zz" does not exist; list sections with: hermes sections list');
  });
});

describe("reordering", () => {
  it.each([
    ["sec_c", 0, ["sec_c", "sec_a", "sec_b"]],
    ["sec_a", 2, ["sec_b", "sec_c", "sec_a"]],
    ["sec_b", 1, ["sec_a", "sec_b", "sec_c"]],
    ["Écrivains", 1, ["sec_a", "sec_c", "sec_b"]],
  ])("moves %s to %i", (ref, index, expected) => {
    expect(order(moveSection(three, ref, index))).toEqual(expected);
  });

  it.each([[-1], [3], [1.5], ["1"]])("refuses the index %j", (index) => {
    const err = thrownHermesError(() => moveSection(three, "sec_a", index));
    expect(err.reason).toBe("invalid_params");
    expect(err.message).toContain("index: must be a whole number from 0 to 2");
  });

  it("takes a full permutation", () => {
    expect(order(reorderSections(three, ["sec_c", "sec_a", "sec_b"]))).toEqual(["sec_c", "sec_a", "sec_b"]);
  });

  it.each([
    ["an unknown id", ["sec_c", "sec_a", "sec_x"], "not_found", 'section "sec_x" does not exist'],
    ["a missing id", ["sec_c", "sec_a"], "invalid_params", "order: sec_b is missing;"],
    ["an id twice", ["sec_c", "sec_a", "sec_a", "sec_b"], "invalid_params", "sec_a is listed twice"],
    ["not a list", "sec_a,sec_b", "invalid_params", "order: must be a list of every section id exactly once (sec_a, sec_b, sec_c)"],
  ])("refuses %s", (_what, list, reason, message) => {
    const err = thrownHermesError(() => reorderSections(three, list));
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
  });
});

describe("deleteSection", () => {
  const membership = new Map<string, string | null>([
    ["zed", "sec_b"],
    ["alice", "sec_b"],
    ["bob", "sec_a"],
    ["default", null],
    ["stale", "sec_gone"],
  ]);

  it("removes the section and returns the bots to unassign; no bot is deleted", () => {
    const result = deleteSection(three, "Team", membership);
    expect(order(result.sections)).toEqual(["sec_a", "sec_c"]);
    expect(result.removed).toEqual(three[1]);
    expect(result.unassign).toEqual(["alice", "zed"]);
  });

  it("an empty section unassigns nobody", () => {
    expect(deleteSection(three, "sec_c", membership).unassign).toEqual([]);
  });

  it("refuses a section that does not exist", () => {
    expect(thrownHermesError(() => deleteSection(three, "sec_gone", membership)).reason).toBe("not_found");
  });
});

describe("resolveSection", () => {
  it("prefers an id, then a name in any case", () => {
    const tricky: Section[] = [
      { id: "team", name: "Clients" },
      { id: "sec_b", name: "Team" },
    ];
    expect(resolveSection(tricky, "team").name).toBe("Clients");
    expect(resolveSection(tricky, "TEAM").id).toBe("sec_b");
    expect(thrownHermesError(() => resolveSection(tricky, "Nope")).data.section_ids).toEqual(["team", "sec_b"]);
  });
});
