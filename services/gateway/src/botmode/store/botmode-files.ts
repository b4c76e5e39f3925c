import { join } from "node:path";
import { HermesError, readYamlFile, toHermesError } from "@hermes/common";
import { stringify as toYaml } from "yaml";
import type { HermesHome } from "../../home/store/home.js";
import { applyProfileMetaPatch, type MetaPatchResult, type ReadMeta, readProfileMeta } from "../core/profile-meta.js";
import { readSections, SECTIONS_FILE, type Section } from "../core/sections.js";

/**
 * Bot Mode's files under HERMES_HOME: each profile's `profile.yaml` (its metadata, in the profile
 * folder so a rename carries it) and `sections.yaml` (the roster's sections, beside the profiles).
 * The core validates; this module only knows where the files are and how they are read and written.
 */

export function profileMetaFile(home: HermesHome, profile: string): string {
  return join(home.profileDir(profile), "profile.yaml");
}

export function sectionsFile(home: HermesHome): string {
  return join(home.root, SECTIONS_FILE);
}

/** A profile.yaml as read: the mapping, or the typed error that the file is not YAML at all. */
export interface MetaFile {
  raw: unknown;
  unreadable: HermesError | undefined;
}

export function readProfileMetaFile(home: HermesHome, profile: string): MetaFile {
  try {
    return { raw: readYamlFile(profileMetaFile(home, profile)), unreadable: undefined };
  } catch (err) {
    return { raw: {}, unreadable: toHermesError(err) };
  }
}

/**
 * The metadata of a file as read (never throws on content: a file that is not YAML reads as the
 * defaults with one problem, as a bad field does), so one hand-edited file cannot break a roster.
 */
export function metaOf(file: MetaFile): ReadMeta {
  const read = readProfileMeta(file.raw);
  if (file.unreadable === undefined) return read;
  const problem = { field: "(top level)", message: file.unreadable.message, valid: "a YAML mapping", reason: file.unreadable.reason };
  return { meta: read.meta, problems: [problem, ...read.problems] };
}

export function writeProfileMeta(home: HermesHome, profile: string, document: Record<string, unknown>): void {
  home.writeFile(profileMetaFile(home, profile), toYaml(document));
}

/**
 * Applies a metadata patch to a profile's profile.yaml (the core's merge-patch rules) and writes
 * the result when something changed. A file that is not YAML is refused rather than replaced.
 */
export function patchProfileMetaFile(home: HermesHome, profile: string, patch: unknown, sectionIds: readonly string[]): MetaPatchResult {
  const file = readProfileMetaFile(home, profile);
  if (file.unreadable !== undefined) {
    throw new HermesError("invalid_config", `${file.unreadable.message}; fix or remove the file, then try again`, {
      data: { file: profileMetaFile(home, profile) },
    });
  }
  const result = applyProfileMetaPatch(file.raw, patch, { profile, section_ids: sectionIds });
  // Compared as documents, not views: setting a hand-broken field to its default changes the file only.
  if (JSON.stringify(result.document) !== JSON.stringify(file.raw)) writeProfileMeta(home, profile, result.document);
  return result;
}

/** sections.yaml as a mapping (absent: `{}`, no sections). */
export function readSectionsDocument(home: HermesHome): Record<string, unknown> {
  const raw = readYamlFile(sectionsFile(home));
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new HermesError("invalid_config", `${sectionsFile(home)}: (top level): must be a mapping with a list of sections`, {
      data: { file: sectionsFile(home) },
    });
  }
  return raw as Record<string, unknown>;
}

/** The sections in roster order; a broken file is `invalid_config` naming the entry. */
export function readSectionsFile(home: HermesHome): Section[] {
  return readSections(readSectionsDocument(home), sectionsFile(home));
}

/**
 * The sections for display, never failing: a broken sections.yaml lists none (a roster still
 * shows every bot, in Unassigned) and `problem` says why.
 */
export function sectionsForDisplay(home: HermesHome): { sections: Section[]; problem: string | undefined } {
  try {
    return { sections: readSectionsFile(home), problem: undefined };
  } catch (err) {
    return { sections: [], problem: toHermesError(err).message };
  }
}

export function writeSectionsDocument(home: HermesHome, document: Record<string, unknown>): void {
  home.writeFile(sectionsFile(home), toYaml(document));
}
