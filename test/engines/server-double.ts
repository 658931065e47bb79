/** Shared by the engine tests that stand up an HTTP test double of a server (127.0.0.1 only). */
import type { Server } from "node:http";
import { afterEach } from "vitest";

/** Closes the double and every connection still open to it (nothing when there is none). */
export async function closeDouble(server: Server | undefined): Promise<void> {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
}

/** A test's engine and the test double it talks to, set by the test. */
export interface EngineAndDouble<E extends { close(): Promise<void> }> {
  engine: E | undefined;
  double: Server | undefined;
}

/**
 * The engine and double a test file's tests set, closed after each test (the engine first: its
 * requests end before the double's connections are cut) and cleared, so no test sees another's.
 */
export function closedAfterEach<E extends { close(): Promise<void> }>(): EngineAndDouble<E> {
  const live: EngineAndDouble<E> = { engine: undefined, double: undefined };
  afterEach(async () => {
    await live.engine?.close();
    live.engine = undefined;
    await closeDouble(live.double);
    live.double = undefined;
  });
  return live;
}
