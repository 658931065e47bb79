import { lookup } from "node:dns/promises";

/**
 * The one address a listen on `localhost` binds. Given that name, fastify binds every address it
 * resolves to, the extra ones on servers of its own that the connection limits, idle timeouts and the
 * stop's answer tracking never see; a plain Node server binds the first address, and so do we.
 */
export async function bindHost(host: string): Promise<string> {
  return host.toLowerCase() === "localhost" ? (await lookup(host)).address : host;
}
