import { HermesError } from "@hermes/common/pure";
import { ID_RULE, isValidId } from "@hermes/contract";
import { z } from "zod";
import { checkLabel, describeType, labelKey } from "./labels.js";

/**
 * Roster sections: folders people make (Clients, Team…), ordered. The list lives in
 * `HERMES_HOME/sections.yaml`; a bot's membership is the `section` id in its own profile.yaml, so it
 * moves with the profile on a rename and a bot is in at most one section. Ids never change and are
 * never reused, so renaming a section touches no bot, and a bot still naming a deleted section reads
 * as Unassigned.
 */

export const SECTIONS_FILE = "sections.yaml";
export const SECTION_NAME_MAX = 64;
export const MAX_SECTIONS = 100;
/** The roster's bucket for bots in no section; a section of that name could not be told from it. */
export const UNASSIGNED = "Unassigned";

/** Keys this version does not know (a newer client's `collapsed`, say) are kept as they are. */
export type Section = { id: string; name: string } & Record<string, unknown>;

export interface SectionView {
  id: string;
  name: string;
  /** Position in the roster, from 0. */
  order: number;
}

const sectionSchema = z.looseObject({
  id: z.string({ error: "must be an id" }).regex(new RegExp(ID_RULE), { error: `must be an id matching ${ID_RULE}` }),
  name: z.string({ error: `must be text of 1-${SECTION_NAME_MAX} characters` }),
});

const sectionsFileSchema = z.looseObject({
  sections: z.array(sectionSchema, { error: "must be a list of {id, name}" }).max(MAX_SECTIONS, {
    error: `must hold at most ${MAX_SECTIONS} sections`,
  }),
});

/**
 * Reads `sections.yaml` (a missing file reads as `{}`: no sections). A broken file is refused as a
 * whole (`invalid_config`, naming the entry): the list is one document, there is no default to fall
 * back on for one entry.
 */
export function readSections(raw: unknown, file = SECTIONS_FILE): Section[] {
  if (raw !== null && typeof raw === "object" && !Array.isArray(raw) && !("sections" in raw)) return [];
  const parsed = sectionsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "(top level)";
    throw new HermesError("invalid_config", `${file}: ${where}: ${issue.message}`, { data: { file, field: where } });
  }
  const sections: Section[] = [];
  parsed.data.sections.forEach((entry, i) => {
    let name: string;
    try {
      name = checkSectionName(entry.name, sections);
    } catch (err) {
      throw new HermesError("invalid_config", `${file}: sections.${i}.${(err as HermesError).message}`, {
        data: { file, field: `sections.${i}.name` },
      });
    }
    if (sections.some((s) => s.id === entry.id)) {
      throw new HermesError("invalid_config", `${file}: sections.${i}.id: ${entry.id} is used twice; ids must be unique`, {
        data: { file, field: `sections.${i}.id` },
      });
    }
    sections.push({ ...entry, name });
  });
  return sections;
}

/** The mapping to write back: the list in order, with whatever else the file held. */
export function sectionsDocument(sections: readonly Section[], base: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...base, sections: sections.map((s) => ({ ...s })) };
}

export function sectionsView(sections: readonly Section[]): SectionView[] {
  return sections.map((s, order) => ({ id: s.id, name: s.name, order }));
}

/** A section name: the label rule, not "Unassigned", not the name of another section (case-insensitively). */
function checkSectionName(value: unknown, others: readonly Section[]): string {
  const name = checkLabel(value, "name", SECTION_NAME_MAX);
  if (labelKey(name) === labelKey(UNASSIGNED)) {
    throw new HermesError("invalid_name", `name: "${UNASSIGNED}" is where bots in no section are listed; pick another name`, {
      data: { field: "name", name },
    });
  }
  const clash = others.find((s) => labelKey(s.name) === labelKey(name));
  if (clash !== undefined) {
    throw new HermesError("already_exists", `name: a section named ${JSON.stringify(clash.name)} already exists; pick another name`, {
      data: { field: "name", name, section: clash.id },
    });
  }
  return name;
}

/** A section by id, or by name (case-insensitively) as people type it on the command line. */
export function resolveSection(sections: readonly Section[], ref: string): Section {
  const found = sections.find((s) => s.id === ref) ?? sections.find((s) => labelKey(s.name) === labelKey(ref));
  if (found === undefined) {
    throw new HermesError("not_found", `section ${JSON.stringify(ref)} does not exist; list sections with: hermes sections list`, {
      // Ids only: names are free text people typed, and an error quotes only what was sent and what is valid.
      data: { section: ref, section_ids: sections.map((s) => s.id) },
    });
  }
  return found;
}

function checkIndex(index: unknown, length: number, field: string): number {
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= length) {
    throw new HermesError("invalid_params", `${field}: must be a whole number from 0 to ${length - 1} (got ${describeType(index)})`, {
      data: { field, valid: { min: 0, max: length - 1 } },
    });
  }
  return index;
}

export interface SectionChange {
  sections: Section[];
  section: Section;
}

/**
 * A new section, at the end or at `index`. `newId` comes from the shell (random); it must be a
 * valid id that no section has.
 */
export function createSection(sections: readonly Section[], name: unknown, newId: () => string, index?: unknown): SectionChange {
  if (sections.length >= MAX_SECTIONS) {
    throw new HermesError("limit_exceeded", `there are already ${MAX_SECTIONS} sections, the most there can be; delete one first`, {
      data: { limit: MAX_SECTIONS },
    });
  }
  const checkedName = checkSectionName(name, sections);
  const id = newId();
  if (!isValidId(id) || sections.some((s) => s.id === id)) throw new HermesError("internal", `section id ${JSON.stringify(id)} is not new`);
  const at = index === undefined ? sections.length : checkIndex(index, sections.length + 1, "index");
  const section: Section = { id, name: checkedName };
  return { sections: [...sections.slice(0, at), section, ...sections.slice(at)], section };
}

export function renameSection(sections: readonly Section[], ref: string, name: unknown): SectionChange {
  const target = resolveSection(sections, ref);
  const checkedName = checkSectionName(
    name,
    sections.filter((s) => s.id !== target.id),
  );
  const section: Section = { ...target, name: checkedName };
  return { sections: sections.map((s) => (s.id === target.id ? section : s)), section };
}

/** Moves one section to `index` (0 is the top); the others keep their order. */
export function moveSection(sections: readonly Section[], ref: string, index: unknown): Section[] {
  const target = resolveSection(sections, ref);
  const at = checkIndex(index, sections.length, "index");
  const rest = sections.filter((s) => s.id !== target.id);
  return [...rest.slice(0, at), target, ...rest.slice(at)];
}

/** The whole order at once: `ids` must name every section exactly once. */
export function reorderSections(sections: readonly Section[], ids: unknown): Section[] {
  const valid = `a list of every section id exactly once (${sections.map((s) => s.id).join(", ")})`;
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== "string")) {
    throw new HermesError("invalid_params", `order: must be ${valid} (got ${describeType(ids)})`, { data: { field: "order", valid } });
  }
  const byId = new Map(sections.map((s) => [s.id, s]));
  const unknownId = ids.find((id) => !byId.has(id));
  if (unknownId !== undefined) {
    throw new HermesError("not_found", `order: section ${JSON.stringify(unknownId)} does not exist; it must be ${valid}`, {
      data: { field: "order", section: unknownId, section_ids: sections.map((s) => s.id) },
    });
  }
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  const missing = sections.find((s) => !ids.includes(s.id));
  if (twice !== undefined || missing !== undefined) {
    // Ids only, as in every error here: a name is text someone typed, not what was sent.
    const what = twice !== undefined ? `${twice} is listed twice` : `${missing!.id} is missing`;
    throw new HermesError("invalid_params", `order: ${what}; it must be ${valid}`, { data: { field: "order", valid } });
  }
  return (ids as string[]).map((id) => byId.get(id)!);
}

export interface SectionDeletion {
  sections: Section[];
  removed: Section;
  /** Profiles filed in the removed section, sorted: their `section` is cleared (and an Undo can refile them). */
  unassign: string[];
}

/**
 * Deletes a section; never a bot. `membership` maps each profile to its section (from the profiles'
 * metadata). The shell writes the list first (that is the deletion), then clears the profiles in
 * `unassign`; one it could not rewrite still reads as Unassigned, because its id is gone for good.
 */
export function deleteSection(sections: readonly Section[], ref: string, membership: ReadonlyMap<string, string | null>): SectionDeletion {
  const removed = resolveSection(sections, ref);
  const unassign = [...membership]
    .filter(([, section]) => section === removed.id)
    .map(([profile]) => profile)
    .sort();
  return { sections: sections.filter((s) => s.id !== removed.id), removed, unassign };
}
