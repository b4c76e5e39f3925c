import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toHermesError } from "@hermes/common";
import { BotModeServiceClient, type SectionInfo, type SectionList } from "@hermes/proto/hermes/v1/botmode";
import { GatewayServiceClient, type GetProfileRequest, type Profile, type UpdateProfileRequest } from "@hermes/proto/hermes/v1/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { createBot, sendAndWait } from "../support/delivery-fixtures.js";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * Bot Mode metadata and sections in a real gateway, over JSON-RPC (`profiles.*`, `sections.*`) and
 * gRPC (GatewayService.UpdateProfile, BotModeService): the same views and the same refusals, the
 * files they live in, and what a rename, a clone and a delete do to them.
 */

let t: TestGateway;
let rpc: RpcClient;
const profileYaml = (name: string) =>
  parseYaml(readFileSync(join(t.home, "profiles", name, "profile.yaml"), "utf8")) as Record<string, unknown>;

type ProfileJson = {
  name: string;
  display_name: string;
  title: string;
  description: string;
  meta: {
    hidden: boolean;
    section: string | null;
    section_name: string | null;
    avatar: { style: string; seed: string | null; locked: boolean; silhouette: string | null; effective_seed: string };
    ui_meta: Record<string, unknown>;
    problems: string[];
  };
};

function grpcUpdate(name: string, patch: unknown): Promise<Profile> {
  const client = t.client(GatewayServiceClient);
  return call<UpdateProfileRequest, Profile>(client, client.updateProfile, { name, patch_json: JSON.stringify(patch) });
}

function grpcGet(name: string): Promise<Profile> {
  const client = t.client(GatewayServiceClient);
  return call<GetProfileRequest, Profile>(client, client.getProfile, { name });
}

async function rpcRefusal(method: string, params: unknown) {
  return (await rpc.error(method, params)).data;
}

beforeAll(async () => {
  t = await startTestGateway();
  createBot(t, "alice", { title: "Researcher" });
  createBot(t, "bob", { title: "Reviewer" });
  rpc = await RpcClient.connect(t.gateway.httpAddress);
});
afterAll(async () => {
  rpc?.close();
  await t?.destroy();
});

describe("profiles.update / get / list", () => {
  it("merges a patch into profile.yaml, null resets, avatar and ui_meta merge key by key; both transports show the same", async () => {
    const first = await rpc.call<ProfileJson>("profiles.update", {
      name: "alice",
      patch: {
        display_name: "Alice 🤖",
        hidden: true,
        avatar: { seed: "r1", silhouette: "cloud" },
        ui_meta: { desktop: { pinned: true } },
      },
    });
    expect(first).toMatchObject({
      name: "alice",
      display_name: "Alice 🤖",
      meta: {
        hidden: true,
        avatar: { style: "blob", seed: "r1", silhouette: "cloud", effective_seed: "r1" },
        ui_meta: { desktop: { pinned: true } },
      },
    });
    // A second client sets another key of ui_meta and of avatar; nothing of the first is undone.
    await grpcUpdate("alice", { ui_meta: { web: { theme: "dark" } }, avatar: { locked: true } });
    const wire = await grpcGet("alice");
    expect(wire.meta).toMatchObject({ hidden: true, section: "", avatar: { seed: "r1", locked: true, silhouette: "cloud" } });
    expect(JSON.parse(wire.meta!.ui_meta_json)).toEqual({ desktop: { pinned: true }, web: { theme: "dark" } });
    expect(profileYaml("alice")).toMatchObject({
      display_name: "Alice 🤖",
      hidden: true,
      avatar: { seed: "r1", silhouette: "cloud", locked: true },
      ui_meta: { desktop: { pinned: true }, web: { theme: "dark" } },
    });

    const reset = await rpc.call<ProfileJson>("profiles.update", { name: "alice", patch: { hidden: null, ui_meta: { desktop: null } } });
    expect(reset.meta).toMatchObject({ hidden: false, ui_meta: { web: { theme: "dark" } } });
    expect(profileYaml("alice")).not.toHaveProperty("hidden");
    const { profiles } = await rpc.call<{ profiles: ProfileJson[] }>("profiles.list", {});
    expect(profiles.find((p) => p.name === "alice")?.meta.ui_meta).toEqual({ web: { theme: "dark" } });
  });

  it("title and description go to config.yaml (comments kept) and the persona uses the display name", async () => {
    const file = join(t.home, "profiles", "bob", "config.yaml");
    writeFileSync(file, "# bob's settings\ntitle: Reviewer # shown in rosters\n");
    const r = await rpc.call<ProfileJson>("profiles.update", {
      name: "bob",
      patch: { title: "Lead reviewer", description: "Reads every diff.\nTwice.", display_name: "Bobby" },
    });
    expect(r).toMatchObject({ title: "Lead reviewer", description: "Reads every diff.\nTwice.", display_name: "Bobby" });
    expect(readFileSync(file, "utf8")).toBe(
      "# bob's settings\ntitle: Lead reviewer # shown in rosters\ndescription: |-\n  Reads every diff.\n  Twice.\n",
    );
    const turn = await t.gateway.chat.turn({ profile: "bob", text: "who are you?" });
    expect(turn.reply).toBe("I'm Bobby (Lead reviewer), @bob.");
    await rpc.call("profiles.update", { name: "bob", patch: { description: "", display_name: null } });
    expect(readFileSync(file, "utf8")).toBe("# bob's settings\ntitle: Lead reviewer # shown in rosters\n");
    expect((await grpcGet("bob")).display_name).toBe("bob");
  });

  it("refuses the wrong type, unknown fields, too much ui_meta and bad text, naming the field; nothing is written", async () => {
    const before = readFileSync(join(t.home, "profiles", "alice", "profile.yaml"), "utf8");
    const cases: [unknown, string, RegExp][] = [
      [{ hidden: "yes" }, "invalid_params", /^hidden: must be true or false \(got text "yes"\)/],
      [{ avatar: { style: "photo" } }, "invalid_params", /^avatar\.style: must be one of blob, geometric, image/],
      [{ avatar: { colour: "red" } }, "invalid_params", /^avatar\.colour: is not an avatar field/],
      [
        { colour: "red" },
        "invalid_params",
        /^colour: is not a profile metadata field; the fields are display_name, hidden, section, avatar, ui_meta/,
      ],
      [
        { ui_meta: { blob: "x".repeat(17_000) } },
        "payload_too_large",
        /^ui_meta: is \d+ bytes serialized; it must be a JSON object of at most 16384 bytes/,
      ],
      [{ ui_meta: [1, 2] }, "invalid_params", /^ui_meta: must be a JSON object/],
      [{ display_name: "x".repeat(65) }, "invalid_params", /^display_name: is 65 characters; it must be text of 1-64 characters/],
      [{ display_name: "two\nlines" }, "invalid_params", /^display_name: contains a line break/],
      [{ title: "t".repeat(201) }, "invalid_params", /^title: is 201 characters; it must be text of 1-200 characters/],
      [{ description: "d".repeat(2001) }, "invalid_params", /^description: is 2001 characters/],
      [{ section: "Nowhere" }, "not_found", /^section "Nowhere" does not exist; list sections with: hermes sections list/],
      ["hidden", "invalid_params", /^the update must be a mapping of display_name, hidden, section, avatar, ui_meta/],
    ];
    for (const [patch, reason, message] of cases) {
      const viaRpc = await rpcRefusal("profiles.update", { name: "alice", patch });
      expect(viaRpc.reason, JSON.stringify(patch)).toBe(reason);
      const viaGrpc = await grpcUpdate("alice", patch).then(
        () => expect.fail(`${JSON.stringify(patch)} was accepted`),
        (e: unknown) => toHermesError(e),
      );
      expect(viaGrpc.reason).toBe(reason);
      expect(viaGrpc.message).toMatch(message);
    }
    const notJson = await call<UpdateProfileRequest, Profile>(
      t.client(GatewayServiceClient),
      t.client(GatewayServiceClient).updateProfile,
      {
        name: "alice",
        patch_json: "{hidden: true",
      },
    ).catch((e: unknown) => toHermesError(e));
    expect(notJson).toMatchObject({ reason: "invalid_params", data: { field: "patch_json" } });
    expect(readFileSync(join(t.home, "profiles", "alice", "profile.yaml"), "utf8")).toBe(before);
  });

  it("a hand-broken field reads as its default with a problem; an update refuses until it is fixed or set", async () => {
    createBot(t, "carol");
    const file = join(t.home, "profiles", "carol", "profile.yaml");
    writeFileSync(file, 'hidden: "yes"\ndisplay_name: Carol\n');
    const shown = await rpc.call<ProfileJson>("profiles.get", { name: "carol" });
    expect(shown).toMatchObject({
      display_name: "Carol",
      meta: { hidden: false, problems: ['hidden: must be true or false (got text "yes")'] },
    });
    expect((await rpcRefusal("profiles.update", { name: "carol", patch: { display_name: "C" } })).reason).toBe("invalid_config");
    const fixed = await rpc.call<ProfileJson>("profiles.update", { name: "carol", patch: { hidden: false } });
    expect(fixed.meta.problems).toEqual([]);
    // Not YAML at all: the roster still lists the bot under its name, and an update does not overwrite the file.
    writeFileSync(file, "display_name: [unclosed\n");
    const broken = await rpc.call<ProfileJson>("profiles.get", { name: "carol" });
    expect(broken.display_name).toBe("carol");
    expect(broken.meta.problems[0]).toMatch(/not valid YAML/);
    expect((await rpcRefusal("profiles.update", { name: "carol", patch: { hidden: true } })).reason).toBe("invalid_config");
    expect(readFileSync(file, "utf8")).toBe("display_name: [unclosed\n");
  });

  it("hidden is display-only: a hidden bot still chats and gets mail", async () => {
    createBot(t, "ghost");
    await rpc.call("profiles.update", { name: "ghost", patch: { hidden: true } });
    expect((await t.gateway.chat.turn({ profile: "ghost", text: "hello" })).reply).toContain("ghost here");
    const receipt = await sendAndWait(t, "alice", "ghost", "are you there?");
    expect(receipt.state).toBe("settled");
  });

  it("a rename keeps the metadata (a locked face stays); a clone copies the look but not the name, hidden or ui_meta", async () => {
    createBot(t, "dora");
    const section = await rpc.call<SectionInfo>("sections.create", { name: "Team" });
    await rpc.call("profiles.update", {
      name: "dora",
      patch: { display_name: "Dora", hidden: true, section: "team", avatar: { locked: true, silhouette: "sun" }, ui_meta: { x: 1 } },
    });
    expect(profileYaml("dora")).toMatchObject({ avatar: { locked: true, seed: "dora", silhouette: "sun" }, section: section.id });
    t.gateway.profiles.rename("dora", "dorothy");
    const renamed = await rpc.call<ProfileJson>("profiles.get", { name: "dorothy" });
    expect(renamed).toMatchObject({
      display_name: "Dora",
      meta: { hidden: true, section: section.id, section_name: "Team", avatar: { effective_seed: "dora", locked: true } },
    });

    t.gateway.profiles.create("dora2", { clone_from: "dorothy" });
    const clone = await rpc.call<ProfileJson>("profiles.get", { name: "dora2" });
    expect(clone).toMatchObject({
      display_name: "dora2",
      meta: {
        hidden: false,
        section: section.id,
        ui_meta: {},
        avatar: { seed: "dora", effective_seed: "dora", locked: true, silhouette: "sun" },
      },
    });
    expect(profileYaml("dora2")).toHaveProperty("created_at");

    // A delete takes the metadata with the folder: a bot created again under the name starts plain.
    t.gateway.profiles.delete("dorothy");
    createBot(t, "dorothy");
    expect(await rpc.call<ProfileJson>("profiles.get", { name: "dorothy" })).toMatchObject({
      display_name: "dorothy",
      meta: { hidden: false, section: null, ui_meta: {}, avatar: { seed: null, locked: false, effective_seed: "dorothy" } },
    });
    expect((await rpc.call<{ sections: { id: string }[] }>("sections.list", {})).sections.map((s) => s.id)).toContain(section.id);
  });
});

describe("sections.*", () => {
  it("create, rename, move, reorder and delete; one section per bot; deleting never deletes a bot", async () => {
    const bm = t.client(BotModeServiceClient);
    const clients = await rpc.call<SectionInfo>("sections.create", { name: "Clients" });
    const ops = await call<{ name: string; index?: number }, SectionInfo>(bm, bm.createSection, { name: "Ops", index: 0 });
    expect(ops.order).toBe(0);
    const { sections } = await rpc.call<{ sections: SectionInfo[] }>("sections.list", {});
    expect(sections.map((s) => s.name)).toEqual(["Ops", "Team", "Clients"]);

    // One section per bot: filing it elsewhere moves it.
    await rpc.call("profiles.update", { name: "bob", patch: { section: "Clients" } });
    await rpc.call("profiles.update", { name: "bob", patch: { section: ops.id } });
    const listed = await call<object, SectionList>(bm, bm.listSections, {});
    expect(listed.sections.find((s) => s.id === ops.id)?.profiles).toEqual(["bob"]);
    expect(listed.sections.find((s) => s.id === clients.id)?.profiles).toEqual([]);

    const renamed = await rpc.call<SectionInfo>("sections.rename", { section: "ops", name: "Operations" });
    expect(renamed).toMatchObject({ id: ops.id, name: "Operations", profiles: ["bob"] });
    const moved = await rpc.call<{ sections: SectionInfo[] }>("sections.move", { section: ops.id, index: 2 });
    expect(moved.sections.map((s) => s.name)).toEqual(["Team", "Clients", "Operations"]);
    const reordered = await rpc.call<{ sections: SectionInfo[] }>("sections.reorder", { order: ["Operations", clients.id, "team"] });
    expect(reordered.sections.map((s) => [s.name, s.order])).toEqual([
      ["Operations", 0],
      ["Clients", 1],
      ["Team", 2],
    ]);

    const deleted = await rpc.call<{ removed: SectionInfo; unassigned: string[] }>("sections.delete", { section: "Operations" });
    expect(deleted).toMatchObject({ removed: { id: ops.id, name: "Operations" }, unassigned: ["bob"] });
    expect(t.gateway.profiles.names()).toContain("bob");
    expect(profileYaml("bob")).not.toHaveProperty("section");
    expect((await grpcGet("bob")).meta?.section).toBe("");
  });

  it("refuses a section that does not exist, a duplicate or reserved name, a bad position or order", async () => {
    const bm = t.client(BotModeServiceClient);
    const cases: [string, unknown, string, RegExp][] = [
      ["sections.rename", { section: "Nowhere", name: "X" }, "not_found", /^section "Nowhere" does not exist/],
      ["sections.delete", { section: "Nowhere" }, "not_found", /^section "Nowhere" does not exist/],
      ["sections.create", { name: "clients" }, "already_exists", /^name: a section named "Clients" already exists/],
      ["sections.create", { name: "unassigned" }, "invalid_name", /^name: "Unassigned" is where bots in no section are listed/],
      ["sections.create", { name: "" }, "invalid_params", /^name: is empty/],
      ["sections.move", { section: "Team", index: 9 }, "invalid_params", /^index: must be a whole number from 0 to 1/],
      ["sections.move", { section: "Team", index: 0.5 }, "invalid_params", /^index: must be a whole number/],
      ["sections.reorder", { order: ["Team"] }, "invalid_params", /^order: .* is missing/],
      ["sections.reorder", { order: ["Team", "Team"] }, "invalid_params", /^order: .* is listed twice/],
    ];
    for (const [method, params, reason, message] of cases) {
      const e = await rpc.error(method, params);
      expect(e.data.reason, `${method} ${JSON.stringify(params)}`).toBe(reason);
      expect(e.message).toMatch(message);
    }
    const viaGrpc = await call<{ section: string; index: number }, SectionList>(bm, bm.moveSection, { section: "Team", index: 9 }).catch(
      (e: unknown) => toHermesError(e),
    );
    expect(viaGrpc).toMatchObject({
      reason: "invalid_params",
      message: expect.stringMatching(/^index: must be a whole number from 0 to 1/),
    });
  });
});
