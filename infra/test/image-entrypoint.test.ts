// The images start `hermes` through infra/image/hermes.sh: with the same node flags as every other
// place this project starts a daemon (DAEMON_NODE_FLAGS), so a gateway in a container runs as the
// benchmarks measured it.
import { readFileSync } from "node:fs";
import { DAEMON_NODE_FLAGS } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";

const ENTRYPOINT = readFileSync(new URL("../image/hermes.sh", import.meta.url), "utf8");

describe("the images' entrypoint", () => {
  it("runs the CLI with the daemons' node flags, passing every argument on as given", () => {
    const exec = ENTRYPOINT.split("\n").find((l) => l.startsWith("exec "));
    expect(exec).toBe(`exec node ${DAEMON_NODE_FLAGS.join(" ")} /app/services/cli/bin/hermes.js "$@"`);
  });
});
