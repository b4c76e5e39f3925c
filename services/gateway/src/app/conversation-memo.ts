import type { ChatMessage } from "../core/models/provider.js";

/** A session's conversation as provider messages, as of transcript seq `seq`. */
export interface RememberedConversation {
  seq: number;
  messages: readonly ChatMessage[];
}

/**
 * The conversations of the most recently used sessions, so a turn reads only the transcript rows
 * added since the last one instead of the whole transcript. It outlives the session's warm agent
 * (an agent rebuilt for a config change, or after its slot went to another session, still starts
 * from here) and is bounded: the least recently used session is forgotten first.
 */
export class ConversationMemo {
  private readonly entries = new Map<string, RememberedConversation>();

  constructor(private readonly capacity: number) {}

  get(sessionId: string): RememberedConversation | undefined {
    const hit = this.entries.get(sessionId);
    if (hit) {
      // Map order is the recency order: the entry moves to the end.
      this.entries.delete(sessionId);
      this.entries.set(sessionId, hit);
    }
    return hit;
  }

  set(sessionId: string, conversation: RememberedConversation): void {
    this.entries.delete(sessionId);
    this.entries.set(sessionId, conversation);
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** The transcript was replaced (compaction) or is gone (profile deleted). */
  forget(sessionId: string): void {
    this.entries.delete(sessionId);
  }

  get size(): number {
    return this.entries.size;
  }
}
