import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { status as GrpcStatus, type Server, type ServerWritableStream } from "@grpc/grpc-js";
import { PROTO_DIR, protoFiles } from "@hermes/proto";
import {
  type HealthCheckRequest,
  HealthCheckResponse,
  type HealthServer,
  HealthService,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@hermes/proto/grpc/health/v1/health";
import { adaptService, type GuardedServer } from "./grpc.js";
import { HermesError } from "./pure/errors.js";

export { ServingStatus };

/**
 * The standard grpc.health.v1 service. The empty service name is the whole server; Kubernetes gRPC
 * probes ask for it. It stays open (no key), like /livez and /readyz.
 */
export class HealthRegistry {
  private readonly statuses = new Map<string, ServingStatus>([["", ServingStatus.NOT_SERVING]]);
  private readonly watchers = new Set<{ service: string; call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse> }>();

  set(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    for (const w of this.watchers) if (w.service === service) w.call.write(HealthCheckResponse.fromPartial({ status }));
  }

  /** Marks every known service (and the server) serving or not serving. */
  setAll(status: ServingStatus): void {
    for (const service of this.statuses.keys()) this.set(service, status);
  }

  addToServer(server: Server): void {
    const handlers: Record<keyof HealthServer & string, unknown> = {
      check: (req: HealthCheckRequest) => {
        const status = this.statuses.get(req.service);
        if (status === undefined) throw new HermesError("not_found", `unknown service ${JSON.stringify(req.service)}`);
        return HealthCheckResponse.fromPartial({ status });
      },
      list: () => ({ statuses: Object.fromEntries([...this.statuses].map(([k, status]) => [k, { status }])) }),
      watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const watcher = { service: call.request.service, call };
        this.watchers.add(watcher);
        call.write(HealthCheckResponse.fromPartial({ status: this.statuses.get(call.request.service) ?? ServingStatus.SERVICE_UNKNOWN }));
        call.on("cancelled", () => this.watchers.delete(watcher));
      },
    };
    server.addService(HealthService, adaptService<HealthServer>(HealthService, handlers as never, { transport: "tcp" }));
  }

  close(): void {
    for (const w of this.watchers) w.call.end();
    this.watchers.clear();
  }
}

/** The reflection services themselves: served (and so listed) next to the rest. */
const REFLECTION_SERVICES = ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];
const REFLECTION_PROTOS = ["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"];

/**
 * Server reflection (v1 and v1alpha), so grpcurl can explore a port. It lists exactly the services
 * this server serves (a control-only service is not offered on TCP): add it after every other
 * service. The descriptors are loaded on demand: parsing the .proto files is daemon start-up work
 * the CLI never needs.
 */
export async function addReflection(server: GuardedServer): Promise<void> {
  reflection ??= (async () => {
    const [{ loadSync }, { ReflectionService }] = await Promise.all([import("@grpc/proto-loader"), import("@grpc/reflection")]);
    // @grpc/reflection ships the reflection .proto files next to its build (build/src → build/proto).
    const reflectionProtoDir = join(dirname(createRequire(import.meta.url).resolve("@grpc/reflection")), "../proto");
    const definitions = loadSync([...protoFiles(), ...REFLECTION_PROTOS], {
      includeDirs: [PROTO_DIR, reflectionProtoDir],
      keepCase: true,
      longs: Number,
      defaults: false,
    });
    return (services: string[]) => new ReflectionService(definitions, { services });
  })();
  const serving = (await reflection)([...server.services, ...REFLECTION_SERVICES]);
  serving.addToServer(server);
}

let reflection: Promise<(services: string[]) => { addToServer(server: Server): void }> | undefined;

export { GrpcStatus };
