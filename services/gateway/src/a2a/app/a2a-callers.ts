import { apiKeyProblem, type KeyRing, type Logger, secretsEqual } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import type { A2aCaller } from "../core/task.js";

/** Who calls with the gateway's own API key: tasks of all such callers share this scope. */
export const API_KEY_CALLER: A2aCaller = { id: "a2a", name: "A2A client" };

/**
 * Who an A2A request comes from, by its bearer key: the gateway's API key (the `a2a` caller), or a
 * key this gateway gave a caller (`a2a.callers.<name>.key_env` in config.yaml, the key in
 * HERMES_HOME/.env or the environment), whose name then attributes its messages and scopes its
 * tasks. Every configured key is compared (in constant time), whichever matches, so the time does
 * not tell which one did. Callers are read when used: an edit applies without a restart.
 */
export class A2aCallers {
  /** Caller keys already reported as unusable, so the log says it once. */
  private readonly reported = new Set<string>();

  constructor(
    private readonly keys: KeyRing,
    private readonly config: ModelConfigSource,
    private readonly logger: Logger,
  ) {}

  private named(): { caller: A2aCaller; key: string }[] {
    let callers: Record<string, { key_env: string }>;
    try {
      callers = this.config.gatewayConfig().a2a?.callers ?? {};
    } catch {
      return []; // an invalid config.yaml: the gateway's key still works
    }
    const secrets = this.config.forProfile(DEFAULT_PROFILE);
    const out: { caller: A2aCaller; key: string }[] = [];
    for (const [name, entry] of Object.entries(callers)) {
      const key = secrets.secret(entry.key_env);
      const problem = key === undefined ? "is not set" : apiKeyProblem(key);
      if (problem !== undefined || key === undefined) {
        if (!this.reported.has(name))
          this.logger.warn(
            { caller: name, key_env: entry.key_env },
            `a2a caller ${name}: ${entry.key_env} ${problem}; its calls are refused`,
          );
        this.reported.add(name);
        continue;
      }
      this.reported.delete(name);
      out.push({ caller: { id: name, name }, key });
    }
    return out;
  }

  /** Whether any key is configured (without one, A2A refuses to run turns for whoever reaches the port). */
  get configured(): boolean {
    return this.keys.required || this.named().length > 0;
  }

  /** The caller a presented key belongs to, or undefined. */
  identify(presented: string | undefined): A2aCaller | undefined {
    if (presented === undefined) return undefined;
    let found: A2aCaller | undefined;
    for (const { caller, key } of this.named()) if (secretsEqual(presented, key) && found === undefined) found = caller;
    const gatewayKey = this.keys.required && this.keys.accepts(presented);
    return gatewayKey ? API_KEY_CALLER : found;
  }
}
