import { HermesError, type ServiceHandlers } from "@hermes/common";
import { isValidGatewayId, isValidId } from "@hermes/contract";
import type { QuorumServiceServer } from "@hermes/proto/hermes/v1/quorum";
import type { QuorumAcks } from "../app/quorum/quorum-acks.js";

/**
 * `QuorumService.Ack`: a replica's durable seq of a quorum room led here. Served on the TCP port
 * only, and only to the mesh key (the daemon adapts it with a key ring of that key alone).
 */
export function quorumServiceHandlers(acks: QuorumAcks): ServiceHandlers<QuorumServiceServer> {
  return {
    ack: (req) => {
      if (!isValidId(req.room_id)) throw new HermesError("invalid_params", "room_id is not a room id", { data: { field: "room_id" } });
      if (!isValidGatewayId(req.gateway_id))
        throw new HermesError("invalid_params", "gateway_id is not a gateway id", { data: { field: "gateway_id" } });
      return acks.replicaAck(req.room_id, req.gateway_id, req.epoch, req.durable_seq);
    },
  };
}
