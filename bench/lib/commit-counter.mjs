// Counts the SQLite commits this process makes that write something (each one is an fsync of the
// WAL at synchronous=FULL), per database file, by wrapping better-sqlite3's Statement#run:
//   - `COMMIT` (what `db.transaction(fn)` runs at its end) counts when a statement inside changed a row;
//   - a write statement run outside a transaction (autocommit) counts when it changed a row.
// Reads and empty commits write no WAL frame, so they are not counted. The gateway under test imports
// the better-sqlite3 module it is given (the one the gateway under test loads), so the gateway's
// commits are counted. Install before opening databases.

const TRANSACTION_CONTROL = /^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b/i;

/**
 * What a statement's SQL is, for the counter: "commit", "rollback", "control" (another
 * transaction statement) or "write" (anything else). Worked out once per SQL text, not on every
 * run: the counter runs inside the CPU the benchmarks measure.
 */
const kinds = new Map();
function statementKind(source) {
  let kind = kinds.get(source);
  if (kind === undefined) {
    if (/^\s*COMMIT\b/i.test(source)) kind = "commit";
    else if (/^\s*ROLLBACK\s*$/i.test(source)) kind = "rollback";
    else if (TRANSACTION_CONTROL.test(source)) kind = "control";
    else kind = "write";
    kinds.set(source, kind);
  }
  return kind;
}

/** Starts counting the commits of `Database` (better-sqlite3); returns the counter (`total()`, `byFile()`, `reset()`). */
export function installCommitCounter(Database) {
  const counts = new Map();
  /** Databases whose open transaction has changed a row. */
  const dirty = new WeakSet();
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1"));
  probe.close();
  const run = proto.run;
  proto.run = function countedRun(...args) {
    const db = this.database;
    const kind = statementKind(this.source);
    if (kind === "commit") {
      const wrote = dirty.has(db);
      dirty.delete(db);
      const result = run.apply(this, args);
      if (wrote) counts.set(db.name, (counts.get(db.name) ?? 0) + 1);
      return result;
    }
    if (kind === "rollback") dirty.delete(db);
    const inTransaction = db.inTransaction;
    const result = run.apply(this, args);
    if (!this.reader && kind === "write" && result.changes > 0) {
      if (inTransaction) dirty.add(db);
      else counts.set(db.name, (counts.get(db.name) ?? 0) + 1);
    }
    return result;
  };
  return {
    total: () => [...counts.values()].reduce((a, b) => a + b, 0),
    byFile: () => new Map(counts),
    reset: () => counts.clear(),
  };
}
