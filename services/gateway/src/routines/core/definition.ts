import { HermesError } from "@hermes/common/pure";
import { assertProfileName } from "@hermes/contract";
import { checkGraceSeconds, checkMisfirePolicy, DEFAULT_GRACE_SECONDS, DEFAULT_MISFIRE, type MisfirePolicy } from "./misfire.js";
import { checkPrompt } from "./prompt.js";
import { checkRoutineName, jobLabel, routineNameKey } from "./routine-name.js";
import { Schedule } from "./schedule.js";

/** What `cron add` (and `routines.add`) is given; the shell has read a prompt file into `prompt` already. */
export interface RoutineDefinitionInput {
  profile: string;
  name: unknown;
  schedule: unknown;
  /** Required here: the shell puts in the gateway's own zone when the person gave none, and it is stored. */
  tz: unknown;
  prompt: unknown;
  misfire?: unknown;
  grace_seconds?: unknown;
}

export interface RoutineDefinition {
  profile: string;
  name: string;
  schedule: Schedule;
  misfire: MisfirePolicy;
  grace_seconds: number;
  prompt: string;
}

/**
 * Validates a new routine field by field, refusing at the first problem with a typed error that
 * names the field and what is valid there (exit 2). `existingNames` are the profile's routines: a
 * name is unique per profile, whatever its case.
 */
export function checkRoutineDefinition(input: RoutineDefinitionInput, existingNames: readonly string[], now: number): RoutineDefinition {
  const profile = assertProfileName(input.profile);
  const name = checkRoutineName(input.name);
  const clash = existingNames.find((other) => routineNameKey(other) === routineNameKey(name));
  if (clash !== undefined) {
    throw new HermesError(
      "already_exists",
      `name: ${jobLabel({ profile, name: clash })} already exists; pick another name, or remove it first (hermes cron remove)`,
      { data: { field: "name", job: jobLabel({ profile, name: clash }) } },
    );
  }
  return {
    profile,
    name,
    schedule: Schedule.parse(input.schedule, input.tz, now),
    misfire: input.misfire === undefined ? DEFAULT_MISFIRE : checkMisfirePolicy(input.misfire),
    grace_seconds: input.grace_seconds === undefined ? DEFAULT_GRACE_SECONDS : checkGraceSeconds(input.grace_seconds),
    prompt: checkPrompt(input.prompt),
  };
}
