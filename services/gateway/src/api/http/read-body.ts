import type { IncomingMessage } from "node:http";
import { HermesError } from "@hermes/common";

function bodyTooLarge(limit: number): HermesError {
  return new HermesError("payload_too_large", `the body is over ${limit} bytes`, { data: { limit } });
}

/**
 * A request body as text, at most `limit` bytes. A larger one (declared or sent) is refused
 * (`payload_too_large`) without keeping it; the socket stays open so the 413 reaches the client
 * (Node discards the rest).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers["content-length"]) > limit) {
      reject(bodyTooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const collect = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      req.off("data", collect);
      chunks.length = 0;
      req.resume();
      reject(bodyTooLarge(limit));
    };
    req.on("data", collect);
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
