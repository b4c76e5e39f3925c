import { describe, expect, it } from "vitest";
import type { Child, ChildExit } from "./children.js";
import { describeExit, Supervisor } from "./supervisor.js";

/** A stand-in for a daemon child: only what the supervisor reads, with an exit the test triggers. */
function fakeChild(name: string, pid: number): { child: Child; exit: (e: ChildExit) => void } {
  let exit: (e: ChildExit) => void = () => {};
  const exited = new Promise<ChildExit>((resolve) => {
    exit = resolve;
  });
  const child = { spec: { name, kind: "gateway", args: [], logFile: `/logs/${name}.log` }, pid, exited } as unknown as Child;
  return { child, exit };
}

/** Resolves with the next line the supervisor says. */
function lines(): { say: (line: string) => void; next: () => Promise<string> } {
  const queue: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  return {
    say: (line) => {
      const w = waiting.shift();
      if (w) w(line);
      else queue.push(line);
    },
    next: () => {
      const line = queue.shift();
      return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

describe("Supervisor", () => {
  it("reports an exit in one line, restarts with back-off after a failed start, and watches the new child", async () => {
    const out = lines();
    const first = fakeChild("gw-2", 100);
    const second = fakeChild("gw-2", 102);
    const starts: (() => Promise<Child>)[] = [
      () => Promise.reject(new Error("gw-2 exited (code 1, signal null) before it was ready; its last output:\nEADDRINUSE")),
      () => Promise.resolve(second.child),
    ];
    const restarted: number[] = [];
    const supervisor = new Supervisor({
      restart: () => starts.shift()!(),
      say: out.say,
      restarted: (c) => restarted.push(c.pid),
      restartHint: "press r to restart it now",
      backoff: { initialMs: 1, multiplier: 3, maxMs: 9 },
    });
    supervisor.watch(first.child);
    first.exit({ code: 0, signal: null });
    expect(await out.next()).toBe(
      "hermes up: gw-2 (pid 100) exited with code 0; the rest of the mesh keeps running; restarting gw-2 in 0 s, or press r to restart it now (log: /logs/gw-2.log)",
    );
    expect(await out.next()).toBe(
      "hermes up: gw-2 did not start again: gw-2 exited (code 1, signal null) before it was ready; its last output; restarting gw-2 in 0 s, or press r to restart it now",
    );
    expect(await out.next()).toBe("hermes up: gw-2 is back (pid 102)");
    expect(restarted).toEqual([102]);
    // The new child is watched too; once closed, nothing restarts any more.
    supervisor.close();
    second.exit({ code: null, signal: "SIGKILL" });
    await second.child.exited;
    expect(starts).toHaveLength(0);
  });

  it("restartNow starts whatever is down without waiting for its back-off", async () => {
    const out = lines();
    const down = fakeChild("relay", 7);
    const back = fakeChild("relay", 8);
    const supervisor = new Supervisor({ restart: () => Promise.resolve(back.child), say: out.say, backoff: { initialMs: 3_600_000 } });
    supervisor.watch(down.child);
    down.exit({ code: null, signal: "SIGTERM" });
    expect(await out.next()).toMatch(
      /^hermes up: relay \(pid 7\) was killed by SIGTERM; the rest of the mesh keeps running; restarting relay in 60 s/,
    );
    supervisor.restartNow();
    expect(await out.next()).toBe("hermes up: relay is back (pid 8)");
    supervisor.close();
  });

  it("describes exits by code or signal", () => {
    expect(describeExit({ code: 3, signal: null })).toBe("exited with code 3");
    expect(describeExit({ code: null, signal: "SIGKILL" })).toBe("was killed by SIGKILL");
  });
});
