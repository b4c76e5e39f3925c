/** The shapes of the gateway's answers the views read (docs/PROTOCOL.md, "Operations and console methods"). */

// The mesh status is the gateway's own model (types only: nothing of the gateway is bundled).
import type { Authority, MemberView as Member } from "../../../gateway/src/ops/core/mesh-status.js";

/** `a2a.status`: the cards served, the agents called, the latest tasks. */
export type { A2aStatus } from "../../../gateway/src/a2a/app/a2a-status.js";
export type { Authority, MeshCopy, MeshGateway, MeshRoom, MeshStatus } from "../../../gateway/src/ops/core/mesh-status.js";
export type { Member };

export interface Session {
  gateway_id: string;
  version: string;
  key_required: boolean;
  methods: string[];
  metadata: boolean;
}

export interface Bot {
  handle: string;
  display_name: string;
  title: string;
  description: string;
  gateway_id: string;
  local: boolean;
  online: boolean;
  active: boolean | null;
  hidden: boolean | null;
  section: string | null;
}

export interface Roster {
  gateway_id: string;
  sections: { id: string; name: string }[] | null;
  bots: Bot[];
}

export interface RoomView {
  room_id: string;
  name: string;
  members: Member[];
  authority_gateway_id: string;
  authority_epoch: number;
  latest_seq: number;
  role: string;
  safety_status: string;
  safety_reason: string | null;
  fenced_by: Authority | null;
  disbanded_at: string | null;
}

export interface RoomState {
  room: RoomView;
  driver_status: string;
  needs_you: boolean;
}

export interface RoomEvent {
  room_id: string;
  seq: number;
  event_id: string;
  kind: string;
  actor: { kind: string; id: string; display_name?: string; profile?: string };
  epoch: number;
  payload: Record<string, unknown>;
  created_at: string;
}

export interface Receipt {
  side?: string;
  delivery_id: string;
  from: string;
  target: string;
  state: string;
  reason?: string;
  error?: string;
  attempts: number;
  created_at: string;
  settled_at?: string;
  reply?: string;
}

export interface PromotePlan {
  room_id: string;
  gateway_id: string;
  role: string;
  authority: Authority;
  last_seq: number;
  latest_seq: number;
  caught_up: boolean;
  safety_status: string;
  safety_reason: string | null;
  following: { state: string; source: string; last_error: string | null } | null;
  checklist: string[];
  coverage_refusal: string | null;
}

export interface DivergenceBranch {
  divergence_id: number;
  from_seq: number;
  count: number;
  branch_gateway_id: string;
  branch_epoch: number;
  winning_gateway_id: string;
  winning_epoch: number;
  markers_only: boolean;
  events: RoomEvent[];
}
