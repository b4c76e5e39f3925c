/**
 * A map that keeps at most `capacity` entries and forgets the least recently used one first: a
 * read (`get`) or a write (`set`) counts as a use. For memory that must stay bounded however many
 * keys pass through it (remembered conversations, rows a connection has read).
 */
export class LruMap<K, V> {
  // A Map iterates in insertion order, so re-inserting an entry on use keeps the oldest use first.
  private readonly entries = new Map<K, V>();

  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`an LruMap holds at least one entry (got ${capacity})`);
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as K);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
