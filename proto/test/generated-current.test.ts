import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { protoFiles } from "../src/index.js";

const script = fileURLToPath(new URL("../scripts/generate.mjs", import.meta.url));

describe("proto codegen", () => {
  it("the committed generated code matches the .proto files (run `npm run proto` if this fails)", () => {
    const out = execFileSync(process.execPath, [script, "--check"], { encoding: "utf8" });
    expect(out).toMatch(/generated code is current/);
  });

  it("ships the standard health protocol and the hermes.v1 files for reflection", () => {
    expect(protoFiles()).toContain("grpc/health/v1/health.proto");
    expect(protoFiles()).toContain("hermes/v1/gateway.proto");
  });
});
