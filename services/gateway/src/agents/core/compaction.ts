/**
 * Context compaction for the single retry after `context_overflow`: the same session is kept,
 * but its transcript is replaced with a shorter one before the turn runs again, so the retry fits
 * where the first attempt did not. Pure: the caller stores the result.
 */

export interface CompactableMessage {
  role: "user" | "assistant" | "tool" | "notification";
  content: string;
  meta: Record<string, unknown>;
  created_at: string;
}

export interface CompactionOptions {
  /** Share of the newest messages kept (0 < f < 1). */
  keep_fraction: number;
  /** Keep at least this many of the newest messages when there are more. */
  min_keep: number;
}

export const DEFAULT_COMPACTION: CompactionOptions = { keep_fraction: 0.25, min_keep: 2 };

export interface Compaction<M extends CompactableMessage> {
  /** The new transcript: a note saying what was removed, then the kept tail. */
  messages: (M | CompactableMessage)[];
  removed: number;
}

/** A turn starts at a user message or a notification; a tail must not begin with a tool result whose call was cut off. */
function startsTurn(m: CompactableMessage): boolean {
  return m.role === "user" || m.role === "notification";
}

/**
 * Keeps the newest share of the transcript, starting at a turn boundary, behind one note that says
 * how much was dropped. Returns undefined when nothing can be removed (a transcript this short is
 * not what overflowed the context).
 */
export function compactTranscript<M extends CompactableMessage>(
  messages: readonly M[],
  at: string,
  options: CompactionOptions = DEFAULT_COMPACTION,
): Compaction<M> | undefined {
  if (!(options.keep_fraction > 0 && options.keep_fraction < 1)) throw new RangeError("keep_fraction must be between 0 and 1");
  const total = messages.length;
  if (total <= options.min_keep) return undefined;
  let start = total - Math.max(options.min_keep, Math.floor(total * options.keep_fraction));
  // Back to the start of the turn the cut falls into (keeps a little more, but whole turns); when
  // that is the very first message, forward to the next turn instead.
  let back = start;
  while (back > 0 && !startsTurn(messages[back]!)) back--;
  if (back > 0) start = back;
  else while (start < total && !startsTurn(messages[start]!)) start++;
  if (start <= 0) return undefined;
  const note: CompactableMessage = {
    role: "notification",
    content: `[Context compacted: the ${start} earlier message${start === 1 ? "" : "s"} of this chat were removed so the conversation fits the model's context window.]`,
    meta: { compaction: { removed: start } },
    created_at: at,
  };
  return { messages: [note, ...messages.slice(start)], removed: start };
}
