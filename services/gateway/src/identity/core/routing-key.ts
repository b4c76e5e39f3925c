import { DEFAULT_PROFILE } from "@hermes/contract";

/** A session's routing key: `agent:<profile>:<platform>:<chat_type>:<chat_id>[:<thread_id>]`. */
export interface RoutingOrigin {
  profile: string;
  platform: string;
  chat_type: string;
  chat_id: string;
  thread_id?: string;
}

/** An origin as the store and the routing index keep it: without its profile, which is the row's (or group's) own. */
export type StoredOrigin = Omit<RoutingOrigin, "profile">;

export function withoutProfile(origin: RoutingOrigin): StoredOrigin {
  const { profile: _, ...rest } = origin;
  return rest;
}

export function originOf(profile: string, stored: StoredOrigin): RoutingOrigin {
  return { profile, ...stored };
}

export function routingKey(origin: RoutingOrigin): string {
  const parts = ["agent", origin.profile, origin.platform, origin.chat_type, origin.chat_id];
  if (origin.thread_id) parts.push(origin.thread_id);
  return parts.join(":");
}

/** The prefix every routing/session key of a profile starts with. */
export function profileKeyPrefix(profile: string): string {
  return `agent:${profile}:`;
}

/**
 * A key split into its profile and the rest (`agent:bob:telegram:dm:7` → bob, `telegram:dm:7`): the
 * store keeps the profile as an id and the rest as `chat_key`. A key of another shape has none.
 */
export function splitProfileKey(key: string): { profile: string; chatKey: string } | undefined {
  const prefix = "agent:";
  if (!key.startsWith(prefix)) return undefined;
  const end = key.indexOf(":", prefix.length);
  if (end <= prefix.length) return undefined;
  return { profile: key.slice(prefix.length, end), chatKey: key.slice(end + 1) };
}

/**
 * The exclusive upper bound of the key range that starts with `prefix`: the same string with its
 * last character incremented (`agent:bob:` → `agent:bob;`), so range scans use the index.
 */
export function prefixUpperBound(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

export function rekeyRoutingKey(key: string, oldProfile: string, newProfile: string): string {
  const oldPrefix = profileKeyPrefix(oldProfile);
  return key.startsWith(oldPrefix) ? profileKeyPrefix(newProfile) + key.slice(oldPrefix.length) : key;
}

/** The canonical Bot Chat of a profile: one per profile, created with it. */
export function botChatOrigin(profile: string): RoutingOrigin {
  return { profile, platform: "bot", chat_type: "dm", chat_id: "bot-chat" };
}

export function isDefaultProfile(name: string): boolean {
  return name === DEFAULT_PROFILE;
}
