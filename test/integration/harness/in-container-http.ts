// An HTTP GET made from inside a container (so it sees the container's network: aliases,
// partitions, NAT). The script is fixed; the URL and headers travel as argv, never through a shell.
export const HTTP_PROBE_SCRIPT = `
const [url, timeoutMs, headersJson] = process.argv.slice(1);
fetch(url, { headers: JSON.parse(headersJson || "{}"), signal: AbortSignal.timeout(Number(timeoutMs)) })
  .then(async (res) => JSON.stringify({ status: res.status, body: await res.text() }))
  .catch((err) => JSON.stringify({ error: err?.cause?.code ?? err?.cause?.message ?? err?.name ?? String(err) }))
  // Exit at once: an aborted connect would otherwise keep the process alive until undici's own
  // 10 s connect timeout.
  .then((line) => process.stdout.write(line.concat(String.fromCharCode(10)), () => process.exit(0)));
`;

export type HttpProbeResult = { status: number; body: string } | { error: string };

export function httpProbeArgv(url: string, timeoutMs: number, headers: Record<string, string> = {}): string[] {
  return ["node", "-e", HTTP_PROBE_SCRIPT, url, String(timeoutMs), JSON.stringify(headers)];
}

export function parseHttpProbe(stdout: string): HttpProbeResult {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line) as HttpProbeResult;
  } catch {
    return { error: `unparsable probe output: ${stdout.slice(0, 200)}` };
  }
}
