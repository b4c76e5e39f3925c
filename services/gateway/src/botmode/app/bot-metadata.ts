import { newId } from "@hermes/common";
import { editProfileConfig } from "../../agents/app/profile-settings.js";
import type { HermesHome } from "../../home/store/home.js";
import type { ProfileInfo, ProfileService } from "../../identity/app/profiles.js";
import { applyProfileMetaPatch, checkDescription, checkTitle, readProfileMeta } from "../core/profile-meta.js";
import {
  createSection,
  deleteSection,
  moveSection,
  renameSection,
  reorderSections,
  resolveSection,
  type Section,
  type SectionView,
  sectionsDocument,
  sectionsView,
} from "../core/sections.js";
import {
  patchProfileMetaFile,
  readProfileMetaFile,
  readSectionsDocument,
  readSectionsFile,
  writeSectionsDocument,
} from "../store/botmode-files.js";

/** A section as clients list it: its place in the roster and the bots filed there. */
export interface SectionInfo extends SectionView {
  profiles: string[];
}

export interface SectionDeleted {
  /** The section as it was, with the bots that were filed there. */
  removed: SectionInfo;
  /** The bots that were filed there, now Unassigned (an Undo can file them again). */
  unassigned: string[];
}

/** The fields of `profiles.update` that live in config.yaml (the persona the turn engine reads) rather than profile.yaml. */
const CONFIG_FIELDS = ["title", "description"] as const;

/**
 * Bot Mode's roster metadata: `profiles.update` (profile.yaml by the core's merge-patch rules, title
 * and description in config.yaml) and the sections (`sections.yaml`). Used by a running gateway and,
 * with no gateway holding the home, by the CLI directly, like ProfileService.
 */
export class BotMetadata {
  constructor(
    private readonly home: HermesHome,
    private readonly profiles: ProfileService,
    private readonly newSectionId: () => string = () => newId("sec"),
  ) {}

  /**
   * Applies a patch: metadata fields (display_name, hidden, section, avatar, ui_meta) as a JSON
   * Merge Patch, `title` and `description` in config.yaml (null or blank clears them). Everything is
   * checked before anything is written. `section` may be a section id or name.
   */
  update(nameOrAlias: string, patch: unknown): ProfileInfo {
    const profile = this.profiles.resolve(nameOrAlias);
    const { config, meta } = splitPatch(patch);
    const sections = readSectionsFile(this.home);
    // A section by id, or by name as people type it.
    if (typeof meta["section"] === "string") meta["section"] = resolveSection(sections, meta["section"]).id;
    const persona = Object.keys(config).length === 0 ? undefined : this.planPersona(profile, config);
    const result = patchProfileMetaFile(
      this.home,
      profile,
      meta,
      sections.map((s) => s.id),
    );
    if (persona !== undefined) this.home.writeFile(persona.file, persona.text);
    if (persona !== undefined || result.changed.includes("display_name")) {
      this.profiles.events.emit("changed", { kind: "relabelled", name: profile });
    }
    return this.profiles.show(profile);
  }

  /** Title and description set or cleared in config.yaml, checked by the same rules as profile create. */
  private planPersona(profile: string, config: Record<string, unknown>) {
    const values: Record<string, string | null> = {};
    if ("title" in config) values["title"] = checkTitle(config["title"]);
    if ("description" in config) values["description"] = checkDescription(config["description"]);
    return editProfileConfig(this.home, profile, (doc) => {
      for (const [key, value] of Object.entries(values)) {
        if (value === null) doc.delete(key);
        else doc.set(key, value);
      }
    });
  }

  sections(): SectionInfo[] {
    return this.withMembers(readSectionsFile(this.home));
  }

  createSection(name: unknown, index?: unknown): SectionInfo {
    const change = this.change((sections) => createSection(sections, name, this.newSectionId, index));
    return this.sectionInfo(change.section.id);
  }

  renameSection(ref: string, name: unknown): SectionInfo {
    const change = this.change((sections) => renameSection(sections, ref, name));
    return this.sectionInfo(change.section.id);
  }

  /** Moves one section to `index` (0 is the top). */
  moveSection(ref: string, index: unknown): SectionInfo[] {
    this.change((sections) => ({ sections: moveSection(sections, ref, index) }));
    return this.sections();
  }

  /** The whole order: every section once, by id or name. */
  reorderSections(order: unknown): SectionInfo[] {
    this.change((sections) => {
      const ids = Array.isArray(order) ? order.map((ref) => (typeof ref === "string" ? resolveSection(sections, ref).id : ref)) : order;
      return { sections: reorderSections(sections, ids) };
    });
    return this.sections();
  }

  /**
   * Deletes a section, never a bot: the list is written first (that is the deletion), then each bot
   * filed there gets its section cleared; one that cannot be rewritten still reads as Unassigned.
   */
  deleteSection(ref: string): SectionDeleted {
    const before = readSectionsFile(this.home);
    const deletion = deleteSection(before, ref, this.membership());
    writeSectionsDocument(this.home, sectionsDocument(deletion.sections, readSectionsDocument(this.home)));
    const ids = deletion.sections.map((s) => s.id);
    for (const profile of deletion.unassign) {
      try {
        patchProfileMetaFile(this.home, profile, { section: null }, ids);
      } catch {
        // Its section id is gone for good, so the bot reads as Unassigned anyway; its next write drops the id.
      }
    }
    const removed = sectionsView(before).find((s) => s.id === deletion.removed.id)!;
    return { removed: { ...removed, profiles: deletion.unassign }, unassigned: deletion.unassign };
  }

  /** Reads sections.yaml, applies a core change and writes the list back (keys of the file it does not know kept). */
  private change<T extends { sections: Section[] }>(apply: (sections: Section[]) => T): T {
    const document = readSectionsDocument(this.home);
    const result = apply(readSectionsFile(this.home));
    writeSectionsDocument(this.home, sectionsDocument(result.sections, document));
    return result;
  }

  private sectionInfo(id: string): SectionInfo {
    return this.sections().find((s) => s.id === id)!;
  }

  /** Each profile's section id, from its profile.yaml. */
  private membership(): Map<string, string | null> {
    return new Map(this.profiles.names().map((name) => [name, readProfileMeta(readProfileMetaFile(this.home, name).raw).meta.section]));
  }

  private withMembers(sections: readonly Section[]): SectionInfo[] {
    const membership = [...this.membership()];
    return sectionsView(sections).map((view) => ({
      ...view,
      profiles: membership.filter(([, section]) => section === view.id).map(([name]) => name),
    }));
  }
}

/** Splits a `profiles.update` patch into its config.yaml fields and its profile.yaml metadata patch. */
function splitPatch(patch: unknown): { config: Record<string, unknown>; meta: Record<string, unknown> } {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) {
    // The core's refusal names the fields and what was given instead.
    applyProfileMetaPatch({}, patch, { profile: "default", section_ids: [] });
  }
  const config: Record<string, unknown> = {};
  const meta: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if ((CONFIG_FIELDS as readonly string[]).includes(key)) config[key] = value;
    else meta[key] = value;
  }
  return { config, meta };
}
