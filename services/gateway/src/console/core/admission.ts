/**
 * Who may use the web console and the /rpc socket, decided from what the request carries. The
 * console is a browser page, so the rules are the browser's threats: a page of another origin
 * must not drive the gateway with the operator's cookie (CSRF, cross-site WebSocket hijacking),
 * and a script without a browser authenticates with the key, not a cookie.
 */

export interface AdmissionRequest {
  /** It changes state or opens a socket (POST, the WebSocket upgrade). */
  mutating: boolean;
  /** `Origin`: absent, the gateway's own or listed in http.allowed_origins, or another. */
  origin: "none" | "allowed" | "foreign";
  /** Whether the gateway has an API key (without one it serves loopback only, and no login exists). */
  keyRequired: boolean;
  /** `Authorization: Bearer …`: absent, one of the gateway's keys, or another. */
  bearer: "none" | "valid" | "invalid";
  /** The console session cookie: absent, a live session, or one the gateway does not know (forged, expired, logged out). */
  session: "none" | "valid" | "invalid";
}

export type Admission =
  | { admit: true; via: "key" | "session" | "open" }
  | { admit: false; status: 401 | 403; why: string; clearCookie: boolean };

/**
 * 1. Another origin is refused outright (403), whatever else the request carries.
 * 2. A Bearer key decides on its own: the right one admits, a wrong one is 401.
 * 3. A keyless gateway is open (as /rpc is): there is nothing to log in with.
 * 4. A session cookie admits; a mutating request on it must name its origin (a browser always
 *    does on POST and WebSocket), so a request without Origin cannot ride on the cookie (403).
 * 5. A cookie the gateway does not know is 401 and cleared; nothing at all is 401.
 */
export function decideAdmission(r: AdmissionRequest): Admission {
  if (r.origin === "foreign") {
    return { admit: false, status: 403, why: "this origin may not use the gateway (list it in http.allowed_origins)", clearCookie: false };
  }
  if (r.bearer === "valid") return { admit: true, via: "key" };
  if (r.bearer === "invalid") return { admit: false, status: 401, why: "wrong API key", clearCookie: false };
  if (!r.keyRequired) return { admit: true, via: "open" };
  if (r.session === "valid") {
    if (r.mutating && r.origin === "none") {
      return { admit: false, status: 403, why: "a console request must carry the Origin header its browser sends", clearCookie: false };
    }
    return { admit: true, via: "session" };
  }
  if (r.session === "invalid")
    return { admit: false, status: 401, why: "the console session expired or is not known here: log in again", clearCookie: true };
  return { admit: false, status: 401, why: "log in with the API key, or send Authorization: Bearer <key>", clearCookie: false };
}
