// Times every SQLite statement this process runs (better-sqlite3's Statement#run, #get, #all and
// #iterate), grouped by database and SQL text: where the event loop's time inside SQLite goes. A
// statement's time is the call's wall time on the event loop, so a COMMIT at synchronous=FULL
// includes its fsync. Costs two clock reads per call, so a benchmark installs it only on request.

/** What a database is, for the report: the gateway's state.db, or a profile's (all profiles together). */
function databaseRole(path) {
  return path.includes("/profiles/") ? "profile state.db" : "state.db";
}

/** Starts timing the statements of `Database` (better-sqlite3); returns the timer (`reset()`, `top(n, per)`). */
export function installStatementTimer(Database) {
  /** `role :: SQL` → [calls, nanoseconds]. */
  const totals = new Map();
  /** Each statement's key, worked out once (not on every call: the timer runs inside what it times). */
  const keys = new WeakMap();
  const keyOf = (statement) => {
    let key = keys.get(statement);
    if (key === undefined) {
      key = `${databaseRole(statement.database.name)} :: ${statement.source.replace(/\s+/g, " ").trim()}`;
      keys.set(statement, key);
    }
    return key;
  };
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1"));
  probe.close();
  for (const method of ["run", "get", "all", "iterate"]) {
    const real = proto[method];
    proto[method] = function timedStatement(...args) {
      const started = process.hrtime.bigint();
      try {
        return real.apply(this, args);
      } finally {
        const ns = process.hrtime.bigint() - started;
        const key = keyOf(this);
        const total = totals.get(key);
        if (total) {
          total[0]++;
          total[1] += ns;
        } else totals.set(key, [1, ns]);
      }
    };
  }
  return {
    reset: () => totals.clear(),
    /** The `n` statements that took longest, per `per` (e.g. deliveries): {statement, calls, us}; and the total µs. */
    top(n, per) {
      const rows = [...totals].map(([statement, [calls, ns]]) => ({ statement, calls: calls / per, us: Number(ns) / 1000 / per }));
      rows.sort((a, b) => b.us - a.us);
      return { total_us: rows.reduce((sum, r) => sum + r.us, 0), statements: rows.slice(0, n) };
    },
  };
}
