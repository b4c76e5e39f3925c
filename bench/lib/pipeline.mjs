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
