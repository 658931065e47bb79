/**
 * A port that will not bind, said in the operator's terms: which flag and address, and why. The
 * system's bare "listen EADDRINUSE … 127.0.0.1:9080" does not say it is the peer port, which an
 * operator who kept the defaults never typed.
 */
const WHY: Record<string, string> = {
  EADDRINUSE: "address already in use; another process, perhaps another node, listens there",
  EADDRNOTAVAIL: "not an address of this machine",
  EACCES: "permission denied; ports below 1024 need root or CAP_NET_BIND_SERVICE",
  ENOTFOUND: "the host name does not resolve",
  EAI_AGAIN: "the host name could not be resolved now (a temporary DNS failure)",
};

/** Codes a retry may clear: another process's port, a DNS outage. Every other code needs a new flag. */
const TRANSIENT = new Set(["EADDRINUSE", "EAI_AGAIN"]);

/**
 * A port that would not bind. `exitCode` as the CLI exits: 1 while another process holds the port or
 * DNS fails for now (a retry may succeed), 2 for an address this machine can never bind as given.
 */
export class ListenError extends Error {
  readonly exitCode: 1 | 2;
  constructor(message: string, code: string, cause: unknown) {
    super(message, { cause });
    this.name = "ListenError";
    this.exitCode = TRANSIENT.has(code) ? 1 : 2;
  }
}

/**
 * Awaits `listening`, rethrowing a bind failure as an error naming `flag` and `address`. The system's
 * code stays in the message: it is what one searches for, and the cluster launcher retries on fresh
 * ports when a node's start failed with EADDRINUSE.
 */
export async function bound<T>(flag: string, address: string, listening: Promise<T>): Promise<T> {
  try {
    return await listening;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = WHY[e.code ?? ""];
    throw why ? new ListenError(`${flag} ${address}: ${why} (${e.code})`, e.code ?? "", err) : err;
  }
}
