// grpc.health.v1.Health/Check from the test process, without generated code: the request
// and response are two tiny protobuf messages, encoded by hand here.
//   HealthCheckRequest  { string service = 1; }
//   HealthCheckResponse { ServingStatus status = 1; }  UNKNOWN=0 SERVING=1 NOT_SERVING=2 SERVICE_UNKNOWN=3
import { Client, credentials, type ServiceError } from "@grpc/grpc-js";

const STATUS = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"] as const;
export type ServingStatus = (typeof STATUS)[number];

function encodeRequest(service: string): Buffer {
  const name = Buffer.from(service, "utf8");
  if (name.length === 0) return Buffer.alloc(0);
  if (name.length > 127) throw new Error("service name too long for this encoder");
  return Buffer.concat([Buffer.from([0x0a, name.length]), name]);
}

function decodeResponse(buf: Buffer): ServingStatus {
  // Field 1, varint (tag 0x08); absent means 0 (proto3 default).
  if (buf.length === 0) return "UNKNOWN";
  if (buf[0] !== 0x08 || buf.length < 2) throw new Error(`unexpected HealthCheckResponse bytes ${buf.toString("hex")}`);
  return STATUS[buf[1] ?? 0] ?? "UNKNOWN";
}

/** Health/Check against host:port (plaintext); `service` "" asks about the whole server. */
export function grpcHealth(address: string, service = "", timeoutMs = 3_000): Promise<ServingStatus> {
  const client = new Client(address, credentials.createInsecure());
  return new Promise<ServingStatus>((resolve, reject) => {
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      encodeRequest,
      decodeResponse,
      service,
      { deadline: Date.now() + timeoutMs },
      (err: ServiceError | null, value?: ServingStatus) => {
        client.close();
        if (err) reject(err);
        else resolve(value ?? "UNKNOWN");
      },
    );
  });
}
