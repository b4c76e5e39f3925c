/** The built console (index.html and assets/), what the gateway serves at `/`. */
export declare const CONSOLE_DIST: string;
