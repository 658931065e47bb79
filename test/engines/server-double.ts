/** Shared by the engine tests that stand up an HTTP test double of a server (127.0.0.1 only). */
import type { Server } from "node:http";

/** Closes the double and every connection still open to it (nothing when there is none). */
export async function closeDouble(server: Server | undefined): Promise<void> {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
}
