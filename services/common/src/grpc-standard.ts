import { status as GrpcStatus, type Server, type ServerWritableStream } from "@grpc/grpc-js";
import { PROTO_DIR, protoFiles } from "@hermes/proto";
import {
  type HealthCheckRequest,
  HealthCheckResponse,
  type HealthServer,
  HealthService,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@hermes/proto/grpc/health/v1/health";
import { HermesError } from "./errors.js";
import { adaptService } from "./grpc.js";

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

/**
 * Server reflection (v1 and v1alpha) over every .proto of the hermes.v1 protocol, so grpcurl can
 * explore it. Loaded on demand: parsing the .proto files is daemon start-up work the CLI never needs.
 */
export async function addReflection(server: Server): Promise<void> {
  reflection ??= (async () => {
    const [{ loadSync }, { ReflectionService }] = await Promise.all([import("@grpc/proto-loader"), import("@grpc/reflection")]);
    return new ReflectionService(loadSync(protoFiles(), { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, defaults: false }));
  })();
  (await reflection).addToServer(server);
}

let reflection: Promise<{ addToServer(server: Server): void }> | undefined;

export { GrpcStatus };
