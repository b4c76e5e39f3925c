import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HermesError } from "@hermes/common";
import { afterEach, describe, expect, it } from "vitest";
import { ModelConfigSource } from "../../agents/app/model-config.js";
import { HermesHome } from "../../home/store/home.js";
import { addA2aPeer, addPeer, editEnvText, listPeers, removePeer } from "./peer-config.js";
import { peerDirectory, peerLinks } from "./peer-directory.js";

const homes: string[] = [];
function home(config?: string, env?: string): HermesHome {
  const root = mkdtempSync(join(tmpdir(), "hpeercfg-"));
  homes.push(root);
  if (config !== undefined) writeFileSync(join(root, "config.yaml"), config);
  if (env !== undefined) writeFileSync(join(root, ".env"), env);
  return new HermesHome(root);
}
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

function refusal(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

const read = (h: HermesHome, f: "config" | "env") => readFileSync(f === "config" ? h.configFile : h.envFile, "utf8");

describe(".env editing", () => {
  it("sets, replaces (dropping repeats) and removes one variable, keeping every other line", () => {
    expect(editEnvText("", "K", "v")).toEqual({ text: "K=v\n", changed: true });
    expect(editEnvText("# c\nA=1", "K", "v").text).toBe("# c\nA=1\nK=v\n");
    expect(editEnvText("A=1\nexport K = old\nB=2\nK=again\n", "K", "new").text).toBe("A=1\nK=new\nB=2\n");
    expect(editEnvText("A=1\nK=old\r\nB=2\n", "K", undefined)).toEqual({ text: "A=1\nB=2\n", changed: true });
    expect(editEnvText("A=1\n", "K", undefined)).toEqual({ text: "A=1\n", changed: false });
    // A longer name with the same prefix, or a comment mentioning it, is not the variable.
    expect(editEnvText("KEY=1\n# K=x\n", "K", undefined)).toEqual({ text: "KEY=1\n# K=x\n", changed: false });
  });
});

describe("add, list, remove", () => {
  it("works on a missing, empty or `null` config.yaml and a null bot_peers", () => {
    for (const config of [undefined, "", "null\n", "bot_peers: null\n", "bot_peers:\n"]) {
      const h = home(config);
      expect(addPeer(h, { name: "spark", url: "grpc://10.0.0.2:7440", key: "k-123-0123456789abcdef" })).toEqual({
        created: true,
        key_variable: "HERMES_PEER_SPARK_KEY",
      });
      expect(listPeers(new ModelConfigSource(h, {}))).toEqual([
        { name: "spark", kind: "gateway", url: "grpc://10.0.0.2:7440", note: null, key_variable: "HERMES_PEER_SPARK_KEY", key_set: true },
      ]);
      expect(statSync(h.envFile).mode & 0o777).toBe(0o600);
    }
  });

  it("keeps comments, other keys and big integers; removing the last peer removes bot_peers", () => {
    const h = home("# top\nplatforms:\n  discord:\n    channel_overrides:\n      123456789012345678901: {model: big} # long id\n", "X=1\n");
    addPeer(h, { name: "a-b", url: "grpcs://peer.example:443", key: "key-ab-0123456789abcdef", note: "lab box" });
    const added = read(h, "config");
    expect(added).toContain("# top\n");
    expect(added).toContain("123456789012345678901: { model: big } # long id");
    expect(added).toContain("a-b:\n    url: grpcs://peer.example:443\n    note: lab box");
    expect(read(h, "env")).toBe("X=1\nHERMES_PEER_A_B_KEY=key-ab-0123456789abcdef\n");
    const directory = peerDirectory(new ModelConfigSource(h, {}));
    expect(directory.url("a-b")).toBe("grpcs://peer.example:443");
    expect(directory.key("a-b")).toBe("key-ab-0123456789abcdef");

    expect(removePeer(h, "a-b")).toEqual({ key_removed: true, key_variable: "HERMES_PEER_A_B_KEY" });
    const removed = read(h, "config");
    expect(removed).not.toContain("bot_peers");
    expect(removed).toContain("123456789012345678901: { model: big } # long id");
    expect(read(h, "env")).toBe("X=1\n");
  });

  it("a key in the process environment counts as set (the same lookup the gateway uses)", () => {
    const h = home("bot_peers:\n  x: {url: grpc://h:1}\n");
    expect(listPeers(new ModelConfigSource(h, { HERMES_PEER_X_KEY: "from-env" }))[0]!.key_set).toBe(true);
    expect(listPeers(new ModelConfigSource(h, {}))[0]!.key_set).toBe(false);
    expect(peerLinks(new ModelConfigSource(h, {}))).toEqual([{ name: "x", url: "grpc://h:1" }]);
  });

  it("refuses what would break the files, changing nothing", () => {
    const broken = home("bot_peers: [\n");
    expect(refusal(() => addPeer(broken, { name: "x", url: "grpc://h:1", key: "some-key-0123456789" }))).toMatchObject({
      reason: "invalid_config",
    });
    expect(read(broken, "config")).toBe("bot_peers: [\n");
    const list = home("bot_peers: [a, b]\n");
    expect(refusal(() => addPeer(list, { name: "x", url: "grpc://h:1", key: "some-key-0123456789" })).message).toContain(
      "bot_peers must be a map",
    );
    const scalar = home("just a string\n");
    expect(refusal(() => removePeer(scalar, "x")).message).toContain("top level must be a map");
    const h = home();
    for (const [settings, reason] of [
      [{ name: "../x", url: "grpc://h:1", key: "some-key-0123456789" }, "invalid_name"],
      [{ name: "x", url: "grpc://h", key: "some-key-0123456789" }, "invalid_params"],
      [{ name: "x", url: "grpc://h:1", key: "" }, "invalid_params"],
      [{ name: "x", url: "grpc://h:1", key: "a\nb" }, "invalid_params"],
      [{ name: "x", url: "grpc://h:1", key: "'quoted-0123456789'" }, "invalid_params"],
      [{ name: "x", url: "grpc://h:1", key: "short" }, "invalid_params"],
      [{ name: "x", url: "grpc://h:1", key: "some-key-0123456789", note: "two\nlines" }, "invalid_params"],
    ] as const) {
      expect(refusal(() => addPeer(h, settings)).reason).toBe(reason);
    }
    expect(() => statSync(h.configFile)).toThrow();
    expect(refusal(() => removePeer(h, "ghost"))).toMatchObject({ reason: "not_found" });
  });

  it("refuses a second name that maps to the same key variable", () => {
    const h = home();
    addPeer(h, { name: "a-b", url: "grpc://h:1", key: "k1-0123456789abcdef" });
    expect(refusal(() => addPeer(h, { name: "a_b", url: "grpc://h:2", key: "k2-0123456789abcdef" }))).toMatchObject({
      reason: "already_exists",
      data: { peer: "a-b", key_variable: "HERMES_PEER_A_B_KEY" },
    });
    expect(addPeer(h, { name: "a-b", url: "grpc://h:3", key: "k3-0123456789abcdef" }).created).toBe(false);
    expect(read(h, "env")).toBe("HERMES_PEER_A_B_KEY=k3-0123456789abcdef\n");
  });

  it("registers an A2A agent under a2a.peers with its key variable; one name is one peer of one kind", () => {
    const h = home("# mine\na2a:\n  keep_alive_seconds: 5\n");
    expect(addA2aPeer(h, { name: "weather", url: "https://agent.example/a2a/", key_env: "WEATHER_KEY", note: "forecasts" })).toEqual({
      created: true,
      key_variable: "WEATHER_KEY",
    });
    expect(addA2aPeer(h, { name: "open", url: "http://127.0.0.1:9/card.json", key: "open-key-0123456789abcdef" }).key_variable).toBe(
      "HERMES_PEER_OPEN_KEY",
    );
    expect(read(h, "config")).toContain("# mine");
    expect(read(h, "config")).toContain("keep_alive_seconds: 5");
    expect(read(h, "env")).toBe("HERMES_PEER_OPEN_KEY=open-key-0123456789abcdef\n");
    const list = listPeers(new ModelConfigSource(h, { WEATHER_KEY: "set-in-environment-0123" }));
    expect(list).toEqual([
      { name: "open", kind: "a2a", url: "http://127.0.0.1:9/card.json", note: null, key_variable: "HERMES_PEER_OPEN_KEY", key_set: true },
      { name: "weather", kind: "a2a", url: "https://agent.example/a2a/", note: "forecasts", key_variable: "WEATHER_KEY", key_set: true },
    ]);
    expect(refusal(() => addPeer(h, { name: "weather", url: "grpc://h:1", key: "k1-0123456789abcdef" }))).toMatchObject({
      reason: "already_exists",
    });
    expect(refusal(() => addA2aPeer(h, { name: "x", url: "grpc://h:1" })).reason).toBe("invalid_params");
    expect(refusal(() => addA2aPeer(h, { name: "x", url: "https://h/", key_env: "NOT A VAR" })).reason).toBe("invalid_params");
    expect(removePeer(h, "open")).toEqual({ key_removed: true, key_variable: "HERMES_PEER_OPEN_KEY" });
    removePeer(h, "weather");
    expect(read(h, "config")).toContain("keep_alive_seconds: 5");
    expect(read(h, "config")).not.toContain("peers");
  });
});
