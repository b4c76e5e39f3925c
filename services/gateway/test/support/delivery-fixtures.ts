import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type {
  DeliverReply,
  DeliverRequest,
  DeliveryServiceClient,
  GetDeliveryRequest,
  ListDeliveriesReply,
  ListDeliveriesRequest,
  SendMessageReply,
  SendMessageRequest,
  Receipt as WireReceipt,
} from "@hermes/proto/hermes/v1/delivery";
import type { ChatReply, ChatRequest, GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { stringify } from "yaml";
import type { Receipt } from "../../src/delivery/core/receipt.js";
import { call, TEST_KEY, type TestGateway } from "./gateway-harness.js";

/** Writes HERMES_HOME/config.yaml (before the gateway starts, or between turns: it is re-read on change). */
export function writeHomeConfig(home: string, config: Record<string, unknown>): void {
  writeFileSync(join(home, "config.yaml"), stringify(config));
}

export function writeHomeEnv(home: string, env: Record<string, string>): void {
  writeFileSync(
    join(home, ".env"),
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
    { mode: 0o600 },
  );
}

/** Creates a profile through the running gateway, then writes its config.yaml. */
export function createBot(t: TestGateway, name: string, config: Record<string, unknown> = {}, env: Record<string, string> = {}): void {
  t.gateway.profiles.create(name, { title: (config["title"] as string | undefined) ?? "" });
  const dir = join(t.home, "profiles", name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.yaml"), stringify(config));
  if (Object.keys(env).length > 0) {
    writeFileSync(
      join(dir, ".env"),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(""),
      { mode: 0o600 },
    );
  }
  t.gateway.deliveries.rosterChanged();
}

export interface StoredMessage {
  seq: number;
  role: string;
  content: string;
  meta: Record<string, unknown>;
}

/** A profile's Bot Chat transcript, read from its state.db with a separate connection. */
export function botChat(t: TestGateway, profile: string): StoredMessage[] {
  const session = t.gateway.sessions.botChat(profile);
  return transcript(t, profile, session.session_id);
}

export function transcript(t: TestGateway, profile: string, sessionId: string): StoredMessage[] {
  const file = profile === "default" ? join(t.home, "state.db") : join(t.home, "profiles", profile, "state.db");
  const db = new Database(file, { readonly: true });
  try {
    return (
      db.prepare("SELECT seq, role, content, meta_json FROM messages WHERE session_id = ? ORDER BY seq").all(sessionId) as {
        seq: number;
        role: string;
        content: string;
        meta_json: string;
      }[]
    ).map(({ meta_json, ...m }) => ({ ...m, meta: JSON.parse(meta_json) as Record<string, unknown> }));
  } finally {
    db.close();
  }
}

/** Sends as `from` and waits for the end state (the sender's receipt). */
export async function sendAndWait(t: TestGateway, from: string, target: string, message: string, ttl?: number): Promise<Receipt> {
  const ack = await t.gateway.deliveries.send(from, target, message, { ttl_seconds: ttl });
  return t.gateway.deliveries.wait(ack.delivery_id);
}

/** Typed calls of the delivery and chat RPCs (the generic `call` cannot infer through grpc-js overloads). */
export const rpc = {
  send(client: DeliveryServiceClient, req: Partial<SendMessageRequest>, key: string | null = TEST_KEY): Promise<SendMessageReply> {
    const full: SendMessageRequest = { profile: "", target: "", message: "", ttl_seconds: 0, delivery_id: "", wait: false, ...req };
    return call<SendMessageRequest, SendMessageReply>(client, client.sendMessage, full, key);
  },
  get(client: DeliveryServiceClient, deliveryId: string, key: string | null = TEST_KEY): Promise<WireReceipt> {
    return call<GetDeliveryRequest, WireReceipt>(client, client.getDelivery, { delivery_id: deliveryId }, key);
  },
  list(client: DeliveryServiceClient, req: Partial<ListDeliveriesRequest>, key: string | null = TEST_KEY): Promise<ListDeliveriesReply> {
    return call<ListDeliveriesRequest, ListDeliveriesReply>(
      client,
      client.listDeliveries,
      { profile: "", state: "", limit: 0, ...req },
      key,
    );
  },
  deliver(client: DeliveryServiceClient, req: DeliverRequest, key: string | null): Promise<DeliverReply> {
    return call<DeliverRequest, DeliverReply>(client, client.deliver, req, key);
  },
  chat(client: GatewayServiceClient, req: Partial<ChatRequest>, key: string | null = TEST_KEY): Promise<ChatReply> {
    return call<ChatRequest, ChatReply>(client, client.chat, { profile: "", text: "", session_id: "", ...req }, key);
  },
};
