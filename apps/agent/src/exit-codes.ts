/** The agent's exit statuses: sysexits' EX_NOPERM for a refused token, EX_CONFIG for a bad configuration. */
export const EXIT_REFUSED = 77;
export const EXIT_CONFIG = 78;
