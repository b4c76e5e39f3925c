import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { HermesHome } from "../../home/store/home.js";
import { ModelConfigSource } from "./model-config.js";

let root: string;
let home: HermesHome;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "hermes-modelcfg-"));
  home = new HermesHome(root);
  home.ensureRoot();
  mkdirSync(join(root, "profiles", "bob"), { recursive: true });
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const write = (rel: string, text: string) => writeFileSync(join(root, rel), text);

describe("ModelConfigSource", () => {
  it("puts a profile's config.yaml over the gateway-wide one, key by key", () => {
    write(
      "config.yaml",
      `model: small\nprovider: openai\nephemeral_system_prompt: be nice\nfallback_providers: [local]\nproviders:\n  openai: {base_url: "https://a.example/v1"}\n  other: {base_url: "https://o.example/v1"}\nplatforms:\n  api:\n    channel_overrides:\n      "1": {model: m1}\n      "2": {model: m2}\n`,
    );
    write(
      "profiles/bob/config.yaml",
      `title: Reviewer\nmodel: big\nproviders:\n  openai: {base_url: "https://b.example/v1"}\nplatforms:\n  api:\n    channel_overrides:\n      "2": {model: bob2}\n`,
    );
    write("profiles/bob/profile.yaml", "display_name: Bobby\n");
    write("profiles/bob/SOUL.md", "  Be thorough.  \n");
    const c = new ModelConfigSource(home, {}).forProfile("bob");
    expect(c.global).toEqual({ model: "big", provider: "openai", ephemeral_system_prompt: "be nice" });
    expect(c.providers).toEqual({ openai: { base_url: "https://b.example/v1" }, other: { base_url: "https://o.example/v1" } });
    expect(c.fallback_providers).toEqual(["local"]);
    expect(c.platforms["api"]?.channel_overrides).toEqual({ "1": { model: "m1" }, "2": { model: "bob2" } });
    expect(c.persona).toEqual({ display_name: "Bobby", handle: "bob", title: "Reviewer", description: "", soul: "Be thorough." });
    expect(c.config_file).toBe(join(root, "profiles", "bob", "config.yaml"));
  });

  it("looks secrets up in the profile's .env, then HERMES_HOME/.env, then the environment", () => {
    write(".env", "A=home\nB=home\n");
    write("profiles/bob/.env", "A=profile\n");
    const c = new ModelConfigSource(home, { A: "env", B: "env", C: "env" }).forProfile("bob");
    expect([c.secret("A"), c.secret("B"), c.secret("C"), c.secret("D")]).toEqual(["profile", "home", "env", undefined]);
  });

  it("re-reads a file when it changes, and names the bad key when it does not validate", () => {
    const source = new ModelConfigSource(home, {});
    write("profiles/bob/config.yaml", "model: one\n");
    expect(source.forProfile("bob").global.model).toBe("one");
    write("profiles/bob/config.yaml", "model: two-two\n");
    expect(source.forProfile("bob").global.model).toBe("two-two");
    write("profiles/bob/config.yaml", "modle: typo\n");
    expect(() => source.forProfile("bob")).toThrow(/unknown key "modle"/);
  });

  it("hands out the same config while none of its files changed, and a new one after any of them did", () => {
    const source = new ModelConfigSource(home, {});
    write("profiles/bob/config.yaml", "model: one\n");
    const first = source.forProfile("bob");
    expect(source.forProfile("bob")).toBe(first);
    const edits: [string, string, (c: ReturnType<ModelConfigSource["forProfile"]>) => unknown, unknown][] = [
      ["profiles/bob/SOUL.md", "Be brief.", (c) => c.persona.soul, "Be brief."],
      ["profiles/bob/profile.yaml", "display_name: Bobby\n", (c) => c.persona.display_name, "Bobby"],
      ["profiles/bob/.env", "K=profile\n", (c) => c.secret("K"), "profile"],
      [".env", "H=home\n", (c) => c.secret("H"), "home"],
      ["config.yaml", "fallback_providers: [local]\n", (c) => c.fallback_providers, ["local"]],
      ["profiles/bob/config.yaml", "model: two-two\n", (c) => c.global.model, "two-two"],
    ];
    let previous = first;
    for (const [file, text, read, expected] of edits) {
      write(file, text);
      const next = source.forProfile("bob");
      expect(next, file).not.toBe(previous);
      expect(read(next), file).toEqual(expected);
      expect(source.forProfile("bob"), file).toBe(next);
      previous = next;
    }
    rmSync(join(root, "profiles", "bob", "SOUL.md"));
    expect(source.forProfile("bob").persona.soul).toBe("");
  });

  it("/model --global writes model and provider, keeping comments and other keys", () => {
    write("profiles/bob/config.yaml", "# my bot\ntitle: Reviewer # shown in rosters\nmodel: old\n");
    const source = new ModelConfigSource(home, {});
    source.writeGlobalModel("bob", "new-model", "openai");
    const text = readFileSync(join(root, "profiles", "bob", "config.yaml"), "utf8");
    expect(text).toBe("# my bot\ntitle: Reviewer # shown in rosters\nmodel: new-model\nprovider: openai\n");
    expect(source.forProfile("bob").global).toMatchObject({ model: "new-model", provider: "openai" });
    source.writeGlobalModel("default", "root-model", undefined);
    expect(readFileSync(join(root, "config.yaml"), "utf8")).toBe("model: root-model\n");
  });
});
