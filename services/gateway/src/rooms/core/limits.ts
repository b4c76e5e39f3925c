/**
 * Room limits, in one place so the store, the adapters and the CLI quote the same numbers.
 * Sizes are UTF-8 bytes of the canonical JSON unless the name says otherwise.
 */

/** Room ids, event ids, gateway ids, member ids, thread ids: `ID_RULE` of @hermes/common (≤128 chars). */
export const MAX_ID_CHARS = 128;
/** Room names, in Unicode code points. */
export const MAX_NAME_CHARS = 200;
/** `payload.text` of a message, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 64 * 1024;
/** A whole event payload (canonical JSON), in UTF-8 bytes. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;
/** An actor object (canonical JSON), in UTF-8 bytes. */
export const MAX_ACTOR_BYTES = 4 * 1024;
/** Discussion rooms hold 2–6 members. */
export const MIN_MEMBERS = 2;
export const MAX_MEMBERS = 6;

/** `groups.log` limit bounds and default (events per page). */
export const MIN_LOG_LIMIT = 1;
export const MAX_LOG_LIMIT = 500;
export const DEFAULT_LOG_LIMIT = 100;
/**
 * Replication pages (the packed encoding a replica asks for) may carry up to this many events: fewer,
 * bigger pages are what lets catch-up approach the transport's limit (a bare gRPC pull of 200-byte
 * events measured ~20 % faster with pages of 5000 than of 1000 on this kind of VM).
 */
export const MAX_REPLICATION_LOG_LIMIT = 5000;
/** Default byte budget of one page (sum of the JSON size of its events). */
export const DEFAULT_PAGE_MAX_BYTES = 2 * 1024 * 1024;
/** Largest byte budget a reader may ask for: a page must fit in one gRPC message (8 MiB on both ends). */
export const MAX_PAGE_MAX_BYTES = 6 * 1024 * 1024;
/** A page byte budget below this is refused: it could not make steady progress. */
export const MIN_PAGE_MAX_BYTES = 1024;
/** Most sends one group-commit batch may carry; keeps one SQLite transaction short. */
export const MAX_BATCH_APPENDS = 1000;
/**
 * The highest authority epoch a gateway accepts or claims. Epochs count promotions, so this is
 * never reached in practice; the bound keeps `epoch + 1` exact in a double and on the wire.
 */
export const MAX_EPOCH = 2 ** 40;
