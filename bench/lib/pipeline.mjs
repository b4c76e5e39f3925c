// The one load driver every pipelined figure uses (our Append stream, unary sends, the echo
// baseline, JetStream publish), so the comparison is between servers, not between client loops:
// `window` requests in flight, the next one issued as soon as one completes, each request's
// latency (issue → acknowledgement) kept for percentiles.

/**
 * Issues `count` requests `send(i)` with at most `window` in flight. Resolves with the wall time and
 * the sorted latencies in ms. Rejects on the first failed request.
 */
export function pipelined(count, window, send) {
  const latencies = new Float64Array(count);
  let next = 0;
  let done = 0;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    if (count === 0) return resolve({ secs: 0, latencies: [] });
    const pump = () => {
      while (next < count && next - done < window) {
        const i = next++;
        const t0 = performance.now();
        send(i).then(() => {
          latencies[i] = performance.now() - t0;
          done++;
          if (done === count) {
            const secs = (performance.now() - started) / 1000;
            resolve({ secs, latencies: latencies.sort() });
          } else pump();
        }, reject);
      }
    };
    pump();
  });
}

/**
 * The open-loop driver of the live-tail figures (our tail, the bare echo stream, JetStream's
 * mirror): issues `total` requests `issue(i)` at `rate` per second by the clock, catching up every
 * millisecond, whatever the answers do. Resolves with the seconds the issuing took.
 */
export function paced(total, rate, issue) {
  const started = performance.now();
  let sent = 0;
  return new Promise((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000) + 1);
      while (sent < due) issue(sent++);
      if (sent < total) setTimeout(tick, 1);
      else resolve((performance.now() - started) / 1000);
    };
    tick();
  });
}

/** How many requests a paced run of `seconds` after `warmupSeconds` of warm-up issues in all, and how many of them warm up. */
export function pacedCounts(rate, seconds, warmupSeconds) {
  return { total: Math.round(rate * (seconds + warmupSeconds)), warm: Math.round(rate * warmupSeconds) };
}
