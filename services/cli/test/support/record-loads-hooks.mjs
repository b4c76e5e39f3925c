import { appendFileSync } from "node:fs";

export async function load(url, context, nextLoad) {
  if (process.env.HERMES_TEST_LOADS) appendFileSync(process.env.HERMES_TEST_LOADS, `${url}\n`);
  return nextLoad(url, context);
}
