import { HermesError } from "@hermes/common/pure";
import { assertProfileName } from "@hermes/contract";
import { checkLabel, describeType, labelKey } from "../../botmode/core/labels.js";

/**
 * A routine belongs to one profile and is named in `hermes cron` as `[bot:<profile>] <name>`.
 * Names are the Bot Mode label rule (1-64 characters, one line) and unique per profile regardless of
 * case, so `Morning summary` and `morning summary` cannot both exist. The profile part cannot hold
 * `]` or a space (the profile-name rule), so the label parses back without ambiguity.
 */
export const ROUTINE_NAME_MAX = 64;

export interface JobRef {
  profile: string;
  name: string;
}

export function checkRoutineName(value: unknown): string {
  return checkLabel(value, "name", ROUTINE_NAME_MAX);
}

/** What two routine names of one profile are compared as. */
export const routineNameKey = labelKey;

export function jobLabel(ref: JobRef): string {
  return `[bot:${ref.profile}] ${ref.name}`;
}

const LABEL_RE = /^\[bot:([^\]\s]*)\]\s+(.*)$/su;

/** Reads `[bot:alice] Morning summary` back into its profile and name, refusing anything else with the format. */
export function parseJobLabel(text: unknown): JobRef {
  const match = typeof text === "string" ? LABEL_RE.exec(text.trim()) : null;
  if (match === null) {
    throw new HermesError(
      "invalid_params",
      `job: ${typeof text === "string" ? JSON.stringify(text) : describeType(text)} is not a routine; routines are named '[bot:<profile>] <name>', e.g. '[bot:alice] Morning summary' (see hermes cron list)`,
      { data: { field: "job", valid: "[bot:<profile>] <name>" } },
    );
  }
  return { profile: assertProfileName(match[1]!), name: checkRoutineName(match[2]) };
}
