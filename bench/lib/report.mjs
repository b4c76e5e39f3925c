// Printing helpers shared by the benchmarks: figures with units, ratios against a baseline measured
// in the same run, and percentiles. Benchmarks print; they never pass or fail on timing.

export function percentile(sortedMs, p) {
  if (sortedMs.length === 0) return Number.NaN;
  const i = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[i];
}

export function fmt(n, digits = 0) {
  return Number.isFinite(n) ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }) : String(n);
}

/** One result line: `label  value unit  (ratio× baseline-label)`. */
export function line(label, value, unit, baseline) {
  const ratio = baseline ? `  (${fmt(value / baseline.value, 2)}× ${baseline.label})` : "";
  console.log(`${label.padEnd(58)} ${fmt(value).padStart(12)} ${unit}${ratio}`);
}

export function header(title) {
  console.log(`\n== ${title}`);
}

export function machine() {
  return `node ${process.version}, ${process.platform}/${process.arch}`;
}

/** The median of the finite values (NaN when there are none). */
export function median(xs) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
