import { type Db, openDatabase } from "@hermes/common";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";

/**
 * A version-9 state.db (before profile ids) holding sessions and routing entries as that version
 * wrote them: the name in `profile_name`, in the key and in the origin; the routing entry as JSON.
 */
export const V9_NOW = "2026-11-30T00:00:00.000Z";

export function openVersion9(path: string): Db {
  return openDatabase(path, { label: "v9", migrations: GATEWAY_MIGRATIONS.slice(0, 9) });
}

export interface V9Session {
  session_id: string;
  session_key: string;
  profile_name: string;
  origin: Record<string, string>;
  routed: boolean;
  model_override?: string;
}

/** `count` sessions of `profile` (every `routeEvery`-th one routed), in one transaction. */
export function v9Sessions(profile: string, count: number, routeEvery = 1): V9Session[] {
  return Array.from({ length: count }, (_, i) => {
    const origin: Record<string, string> = { profile, platform: "telegram", chat_type: "group", chat_id: `-100${i}` };
    if (i % 3 === 1) origin.thread_id = String(i);
    const key = ["agent", profile, origin.platform, origin.chat_type, origin.chat_id, ...(origin.thread_id ? [origin.thread_id] : [])].join(
      ":",
    );
    return {
      session_id: `ses_${profile}_${i}`,
      session_key: key,
      profile_name: profile,
      origin,
      routed: i % routeEvery === 0,
      ...(i % 5 === 0 ? { model_override: "gpt-x" } : {}),
    };
  });
}

export function writeV9Sessions(db: Db, sessions: V9Session[]): void {
  const session = db.prepare(
    `INSERT INTO sessions (session_id, session_key, profile_name, title, kind, origin_json, model_override, provider_override, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'chat', ?, ?, NULL, ?, ?)`,
  );
  const route = db.prepare("INSERT INTO gateway_routing (routing_key, entry_json, updated_at) VALUES (?, ?, ?)");
  db.transaction(() => {
    for (const s of sessions) {
      session.run(
        s.session_id,
        s.session_key,
        s.profile_name,
        `Chat ${s.session_id}`,
        JSON.stringify(s.origin),
        s.model_override ?? null,
        V9_NOW,
        V9_NOW,
      );
      if (!s.routed) continue;
      const entry = {
        routing_key: s.session_key,
        session_key: s.session_key,
        session_id: s.session_id,
        origin: s.origin,
        updated_at: V9_NOW,
      };
      route.run(s.session_key, JSON.stringify(entry), V9_NOW);
    }
  })();
}
