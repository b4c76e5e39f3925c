import type { Db } from "@hermes/common";

/**
 * Former names of profiles (`profile_aliases`): a rename records `old → new`, so mail and commands
 * addressed to the old name still find the profile; creating a profile under a former name takes
 * the name back.
 */

/** The profile a former name now points to, if any. */
export function aliasTarget(db: Db, alias: string): string | undefined {
  return (db.prepare("SELECT profile_name FROM profile_aliases WHERE alias = ?").get(alias) as { profile_name: string } | undefined)
    ?.profile_name;
}

/** A profile's former names, sorted. */
export function aliasesOf(db: Db, profile: string): string[] {
  return (db.prepare("SELECT alias FROM profile_aliases WHERE profile_name = ? ORDER BY alias").all(profile) as { alias: string }[]).map(
    (r) => r.alias,
  );
}

/** Every profile's former names (for the delivery roster). */
export function allAliases(db: Db): Map<string, string[]> {
  const aliases = new Map<string, string[]>();
  const rows = db.prepare("SELECT alias, profile_name FROM profile_aliases").all() as { alias: string; profile_name: string }[];
  for (const r of rows) aliases.set(r.profile_name, [...(aliases.get(r.profile_name) ?? []), r.alias]);
  return aliases;
}

/** Records (or moves) a former name: `alias` now means `profile`. */
export function recordAlias(db: Db, alias: string, profile: string, createdAt: string): void {
  db.prepare(
    "INSERT INTO profile_aliases (alias, profile_name, created_at) VALUES (?, ?, ?) ON CONFLICT(alias) DO UPDATE SET profile_name = excluded.profile_name",
  ).run(alias, profile, createdAt);
}

/** A profile created under a former name takes the name back from the alias. */
export function dropAlias(db: Db, alias: string): void {
  db.prepare("DELETE FROM profile_aliases WHERE alias = ?").run(alias);
}
