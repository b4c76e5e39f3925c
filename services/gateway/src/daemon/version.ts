/** The gateway's version: in its relay hello and in `gateway status`. */
export const VERSION = "0.1.0";
