/** Node and cluster identifiers as they appear on the wire, in certificates and on the command line. */
import { z } from "zod";

/** A node id: short, printable, safe inside a certificate subject, a URI and a header. */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export const nodeIdSchema = z
  .string()
  .regex(NODE_ID_PATTERN, "a node id is 1-64 characters from A-Z a-z 0-9 _ . -");

/** Cluster ids follow the same rule (they end up in a certificate subject too). */
export const clusterIdSchema = z
  .string()
  .regex(NODE_ID_PATTERN, "a cluster id is 1-64 characters from A-Z a-z 0-9 _ . -");

export function isNodeId(s: unknown): s is string {
  return typeof s === "string" && NODE_ID_PATTERN.test(s);
}
