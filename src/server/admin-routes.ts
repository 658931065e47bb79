/** The operator's endpoints (`/admin/*`, used by `prefixmesh bench --compare-policies`): loopback callers only. */
import type { FastifyInstance } from "fastify";
import { BadRequest } from "./openai/api-errors.js";
import { describeZodError, policySwitchSchema } from "./openai/schemas.js";
import type { NodeService } from "./service.js";

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

export function registerAdmin(app: FastifyInstance, service: NodeService): void {
  // Policy switching is an operator action (bench --compare-policies): loopback callers only.
  app.post("/admin/policy", async (req, reply) => {
    if (!LOOPBACK.has(req.ip))
      throw new BadRequest(403, "admin endpoints are loopback-only", null, null, "permission_error");
    const parsed = policySwitchSchema.safeParse(req.body);
    if (!parsed.success) throw new BadRequest(400, describeZodError(parsed.error).message);
    if (!service.setPolicy)
      throw new BadRequest(501, "this node cannot switch policy", null, null, "server_error");
    service.setPolicy(parsed.data.policy);
    return reply.send({ node: service.nodeId, policy: parsed.data.policy });
  });

  app.post("/admin/reset-cache", async (req, reply) => {
    if (!LOOPBACK.has(req.ip))
      throw new BadRequest(403, "admin endpoints are loopback-only", null, null, "permission_error");
    if (!service.resetCache)
      throw new BadRequest(501, "this node cannot reset its cache", null, null, "server_error");
    await service.resetCache();
    return reply.send({ node: service.nodeId, reset: true });
  });
}
