import { describe, expect, it } from "vitest";
import { grpcClientOptions } from "./peer-channel.js";

describe("grpcClientOptions", () => {
  it("keeps grpc-js's default flow-control window unless a receive window is asked for", () => {
    expect(grpcClientOptions({})).not.toHaveProperty("grpc-node.flow_control_window");
  });

  it("passes a receive window to grpc-js as the flow-control window of calls and the connection", () => {
    const options = grpcClientOptions({ receiveWindowBytes: 8 * 1024 * 1024 });
    expect(options["grpc-node.flow_control_window"]).toBe(8 * 1024 * 1024);
    expect(options["grpc.max_receive_message_length"]).toBe(8 * 1024 * 1024);
  });
});
