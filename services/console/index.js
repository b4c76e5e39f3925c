import { fileURLToPath } from "node:url";

/** The built console (index.html and assets/), what the gateway serves at `/`. */
export const CONSOLE_DIST = fileURLToPath(new URL("./dist/", import.meta.url));
