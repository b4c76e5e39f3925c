// The integration harness: import everything from here.

export { ETCD_CLIENT_PORT, EtcdCluster, type EtcdClusterOptions, EtcdNode } from "./etcd.js";
export { type GatedProvider, type GatedProviderState, startGatedProvider } from "./gated-provider.js";
export { grpcHealth, type ServingStatus } from "./grpc-health.js";
export { Ledger, type LedgerVerdict, type ObservedEvent, type SendRecord } from "./ledger.js";
export { Mesh, type MeshOptions, useMesh } from "./mesh.js";
export type { NatTopology } from "./nat.js";
export {
  type AppliedFault,
  describePlan,
  describeStep,
  type FaultKind,
  type NemesisPlan,
  type NemesisStep,
  nemesisSettings,
  planNemesis,
  runNemesis,
} from "./nemesis.js";
export {
  GATEWAY_GRPC_PORT,
  GATEWAY_HTTP_PORT,
  GatewayNode,
  type GatewayOptions,
  type MeshNetwork,
  MeshNode,
  RELAY_GRPC_PORT,
  RELAY_HTTP_PORT,
  RelayNode,
  type TranscriptMessage,
} from "./node.js";
export {
  assertQuorumClean,
  type GatewayLog,
  type LoggedEvent,
  prefixProblems,
  type QuorumObservation,
  type QuorumVerdict,
  quorumSummary,
  type Recovery,
  secondsToFirstAck,
  verifyQuorum,
} from "./quorum-ledger.js";
export { COORDINATOR_PREFIX, failureReason, QuorumMesh, type QuorumMeshOptions, type QuorumWriter, quorumRefusal } from "./quorum-mesh.js";
export { assertDense, ledgerSend, observed, RoomsClient, roomRefusal, sendMany, startWriter, type Writer } from "./rooms-client.js";
export { currentRun, type IntegrationRun } from "./run-context.js";
export { eventually } from "./wait.js";
