/**
 * Discovery: each gateway keeps `<prefix>/gateways/<id>` = {advertise_url, version} under its lease,
 * so the key vanishes when the gateway dies. Values that are not valid records are skipped.
 */

export interface GatewayRegistration {
  advertise_url: string;
  version: string;
}

const ADVERTISE_SCHEMES = new Set(["grpc:", "grpcs:", "http:", "https:"]);
const MAX_URL_CHARS = 2048;
const VERSION_RE = /^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$/;

/** The problem with a registration, or null when it is valid. */
export function registrationProblem(value: unknown): string | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "not a JSON object";
  const raw = value as Record<string, unknown>;
  const url = raw.advertise_url;
  if (typeof url !== "string" || url.length > MAX_URL_CHARS || !URL.canParse(url))
    return `advertise_url ${JSON.stringify(url)} is not a URL`;
  if (!ADVERTISE_SCHEMES.has(new URL(url).protocol))
    return `advertise_url ${JSON.stringify(url)}: grpc://, grpcs://, http:// or https:// only`;
  if (typeof raw.version !== "string" || !VERSION_RE.test(raw.version))
    return `version ${JSON.stringify(raw.version)} is not a version string`;
  return null;
}

export function encodeRegistration(registration: GatewayRegistration): string {
  return JSON.stringify({ advertise_url: registration.advertise_url, version: registration.version });
}

export function parseRegistration(text: string): GatewayRegistration | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (registrationProblem(value) !== null) return null;
  const raw = value as GatewayRegistration;
  return { advertise_url: raw.advertise_url, version: raw.version };
}
