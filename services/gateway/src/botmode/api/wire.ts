import { HermesError } from "@hermes/common";
import type { Routine, RoutineRun } from "@hermes/proto/hermes/v1/botmode";
import type { Profile } from "@hermes/proto/hermes/v1/gateway";
import type { ProfileInfo } from "../../identity/app/profiles.js";
import type { RoutineRunView, RoutineView } from "../../routines/app/routine-service.js";

/**
 * Bot Mode's views as gRPC messages. JSON-RPC sends the views themselves; gRPC has no null and no
 * free-form JSON, so absent values are unset optional fields or empty strings, and `ui_meta`
 * travels as JSON text.
 */

export function toWireProfile(p: ProfileInfo): Profile {
  const { meta } = p;
  return {
    ...p,
    meta: {
      hidden: meta.hidden,
      section: meta.section ?? "",
      section_name: meta.section_name ?? "",
      avatar: {
        style: meta.avatar.style,
        seed: meta.avatar.seed ?? "",
        locked: meta.avatar.locked,
        silhouette: meta.avatar.silhouette ?? "",
        effective_seed: meta.avatar.effective_seed,
      },
      ui_meta_json: JSON.stringify(meta.ui_meta),
      problems: meta.problems,
    },
  };
}

/** `patch_json` of UpdateProfile as the JSON-RPC `patch`. */
export function patchFromJson(text: string): unknown {
  try {
    return JSON.parse(text === "" ? "{}" : text);
  } catch (err) {
    throw new HermesError("invalid_params", `patch_json: is not JSON (${(err as Error).message}); send a JSON object`, {
      data: { field: "patch_json" },
    });
  }
}

const orUnset = <T>(value: T | null): T | undefined => (value === null ? undefined : value);

export function toWireRun(r: RoutineRunView): RoutineRun {
  return {
    run_id: r.run_id,
    job: r.job,
    state: r.state,
    trigger: orUnset(r.trigger),
    scheduled_for: orUnset(r.scheduled_for),
    started_at: orUnset(r.started_at),
    ended_at: orUnset(r.ended_at),
    late_ms: orUnset(r.late_ms),
    reason: orUnset(r.reason),
    error: orUnset(r.error),
    reply: orUnset(r.reply),
    detail: orUnset(r.detail),
  };
}

export function toWireRoutine(r: RoutineView): Routine {
  return { ...r, next_run: orUnset(r.next_run), last_run: r.last_run === null ? undefined : toWireRun(r.last_run) };
}
