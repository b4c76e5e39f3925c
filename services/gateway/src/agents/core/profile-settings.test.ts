import { describe, expect, it } from "vitest";
import { planProfileSettings } from "./profile-settings.js";

describe("profile set: settings to config.yaml edits", () => {
  it("points a bot at an OpenAI-compatible server: provider, model, and the provider's endpoint and key variable", () => {
    expect(
      planProfileSettings(
        { provider: "openai", base_url: "http://127.0.0.1:11434/v1", model: "llama3.2", api_key_env: "OLLAMA_KEY" },
        "local",
      ),
    ).toEqual([
      { path: ["provider"], value: "openai" },
      { path: ["model"], value: "llama3.2" },
      { path: ["providers", "openai", "base_url"], value: "http://127.0.0.1:11434/v1" },
      { path: ["providers", "openai", "api_key_env"], value: "OLLAMA_KEY" },
    ]);
  });

  it("an endpoint without --provider belongs to the profile's current provider", () => {
    expect(planProfileSettings({ base_url: "https://llm.example/v1" }, "vllm")).toEqual([
      { path: ["providers", "vllm", "base_url"], value: "https://llm.example/v1" },
    ]);
  });

  it.each([
    [{}, "local", /^nothing to set: pass --provider, --model, --base-url or --api-key-env$/],
    [{ base_url: "ftp://h/v1" }, "openai", /must be http:\/\/ or https:\/\//],
    [{ base_url: "not a url" }, "openai", /is not a URL/],
    [{ base_url: "http://user:sk-1@h/v1" }, "openai", /must not carry a user or password/],
    [{ base_url: "http://h/v1?key=sk" }, "openai", /must not have a query/],
    [{ base_url: "http://h:1/v1" }, "local", /the local provider has no endpoint/],
    [{ provider: "local", api_key_env: "K" }, "openai", /the local provider has no endpoint or key/],
    [{ provider: "../x" }, "local", /--provider "\.\.\/x"/],
    [{ model: " " }, "local", /--model must be/],
    [{ model: "a\nb" }, "local", /--model must be/],
    [{ api_key_env: "1BAD" }, "openai", /is not an environment variable name/],
  ])("refuses %j (current provider %s) with invalid_params", (settings, current, message) => {
    let err: { reason?: string; message?: string } | undefined;
    try {
      planProfileSettings(settings, current);
    } catch (e) {
      err = e as { reason: string; message: string };
    }
    expect(err?.reason).toBe("invalid_params");
    expect(err?.message).toMatch(message);
  });
});
