import { describe, expect, it } from "vitest";
import { coordinatorKeys, normalizePrefix } from "./keys.js";
import { parseRegistration, registrationProblem } from "./registration.js";
import { parseSingletonValue, singletonTransition, viewSingleton } from "./singleton.js";

describe("viewSingleton", () => {
  const cases: Array<{
    name: string;
    selfLease: string | null;
    leaseValid: boolean;
    key: { lease: string; gatewayId: string | null } | null;
    want: object;
  }> = [
    {
      name: "free, with a valid lease: acquire",
      selfLease: "1",
      leaseValid: true,
      key: null,
      want: { holding: false, acquire: true, holder: null },
    },
    { name: "free, without a valid lease: wait", selfLease: "1", leaseValid: false, key: null, want: { holding: false, acquire: false } },
    { name: "free, unleased: wait", selfLease: null, leaseValid: false, key: null, want: { acquire: false } },
    {
      name: "ours, lease valid: hold",
      selfLease: "1",
      leaseValid: true,
      key: { lease: "1", gatewayId: "A" },
      want: { holding: true, holder: "A" },
    },
    {
      name: "ours, lease lost: stop (self-fence)",
      selfLease: "1",
      leaseValid: false,
      key: { lease: "1", gatewayId: "A" },
      want: { holding: false, acquire: false },
    },
    {
      name: "another's: wait and name it",
      selfLease: "1",
      leaseValid: true,
      key: { lease: "2", gatewayId: "B" },
      want: { holding: false, acquire: false, holder: "B" },
    },
    {
      name: "another's, garbage value: wait",
      selfLease: "1",
      leaseValid: true,
      key: { lease: "2", gatewayId: null },
      want: { holding: false, acquire: false, holder: null },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(viewSingleton({ self: "A", selfLease: c.selfLease, leaseValid: c.leaseValid, key: c.key })).toMatchObject(c.want);
    });
  }

  it("transitions", () => {
    expect(singletonTransition(false, true)).toBe("acquired");
    expect(singletonTransition(true, false)).toBe("lost");
    expect(singletonTransition(true, true)).toBeNull();
    expect(singletonTransition(false, false)).toBeNull();
  });

  it("reads the holder from the value, and nothing from garbage", () => {
    expect(parseSingletonValue('{"gateway_id":"gw-a"}')).toBe("gw-a");
    for (const bad of ["", "x", "[]", '{"gateway_id":"../x"}', '{"gateway_id":7}']) expect(parseSingletonValue(bad)).toBeNull();
  });
});

describe("keys and registrations", () => {
  it("normalizes prefixes and refuses unsafe ones", () => {
    expect(normalizePrefix("/hermes")).toBe("/hermes");
    expect(normalizePrefix("hermes/prod/")).toBe("/hermes/prod");
    for (const bad of ["", "/", "/a b", "/../x/%", "/x\n"]) expect(() => normalizePrefix(bad)).toThrow(/invalid coordinator prefix/);
  });

  it("lays keys out under the prefix and refuses unsafe names", () => {
    const keys = coordinatorKeys("/hermes");
    expect(keys.gateway("gw-a")).toBe("/hermes/gateways/gw-a");
    expect(keys.authority("r1")).toBe("/hermes/rooms/r1/authority");
    expect(keys.singleton("telegram:bot1")).toBe("/hermes/singletons/telegram:bot1");
    expect(keys.gatewayIdOf("/hermes/gateways/gw-a")).toBe("gw-a");
    expect(keys.gatewayIdOf("/hermes/gateways/a/b")).toBeNull();
    expect(() => keys.gateway("a/b")).toThrow(/invalid gateway id/);
    expect(() => keys.authority("../x")).toThrow(/invalid room id/);
  });

  it("validates registrations", () => {
    expect(registrationProblem({ advertise_url: "grpc://10.0.0.5:7440", version: "0.1.0" })).toBeNull();
    expect(registrationProblem({ advertise_url: "ftp://x", version: "0.1.0" })).toMatch(/grpc:\/\//);
    expect(registrationProblem({ advertise_url: "not a url", version: "0.1.0" })).toMatch(/not a URL/);
    expect(registrationProblem({ advertise_url: "grpc://h:1", version: "" })).toMatch(/version/);
    expect(parseRegistration('{"advertise_url":"grpc://h:1","version":"1.2.3"}')).toEqual({
      advertise_url: "grpc://h:1",
      version: "1.2.3",
    });
    expect(parseRegistration("{")).toBeNull();
  });
});
