import { describe, expect, it } from "vitest";
import { type AdmissionRequest, decideAdmission } from "./admission.js";

const base: AdmissionRequest = { mutating: false, origin: "none", keyRequired: true, bearer: "none", session: "none" };
const decide = (over: Partial<AdmissionRequest>) => decideAdmission({ ...base, ...over });

describe("decideAdmission", () => {
  it("refuses another origin whatever the request carries", () => {
    for (const bearer of ["none", "valid"] as const)
      for (const session of ["none", "valid"] as const)
        expect(decide({ origin: "foreign", bearer, session, mutating: true })).toMatchObject({ admit: false, status: 403 });
  });

  it("a Bearer key decides on its own; a keyless gateway is open", () => {
    expect(decide({ bearer: "valid", mutating: true })).toEqual({ admit: true, via: "key" });
    expect(decide({ bearer: "invalid", session: "valid" })).toMatchObject({ admit: false, status: 401 });
    expect(decide({ keyRequired: false, mutating: true })).toEqual({ admit: true, via: "open" });
  });

  it("a session admits, but a mutating request on it needs an Origin", () => {
    expect(decide({ session: "valid" })).toEqual({ admit: true, via: "session" });
    expect(decide({ session: "valid", mutating: true, origin: "allowed" })).toEqual({ admit: true, via: "session" });
    expect(decide({ session: "valid", mutating: true })).toMatchObject({ admit: false, status: 403 });
  });

  it("an unknown cookie is 401 and cleared; nothing is 401", () => {
    expect(decide({ session: "invalid" })).toMatchObject({ admit: false, status: 401, clearCookie: true });
    expect(decide({})).toMatchObject({ admit: false, status: 401, clearCookie: false });
  });
});
