import { describe, expect, it } from "vitest";
import { describeClientError } from "../../src/net/framework-answers.js";
import { methodInPacket } from "../../src/net/request-line.js";

describe("methodInPacket", () => {
  it("names the method of the last request line in a packet", () => {
    expect(methodInPacket(Buffer.from("HEAD /x HTTP/1.1\r\nHost: a\r\n"))).toBe("HEAD");
    // Pipelined: the request that failed is the last one begun.
    const two = "GET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD /y?q=1 HTTP/1.1\r\nX-Long: aaaa";
    expect(methodInPacket(Buffer.from(two))).toBe("HEAD");
    expect(methodInPacket(Buffer.from("HEAD / HTTP/9.9\r\n\r\n"))).toBe("HEAD");
  });

  it("knows none where the packet holds no whole request line", () => {
    expect(methodInPacket(Buffer.from("X-Long: aaaa\r\nHEAD: x\r\n"))).toBeUndefined();
    expect(methodInPacket(Buffer.from("HEA"))).toBeUndefined();
    expect(methodInPacket(Buffer.alloc(0))).toBeUndefined();
    expect(methodInPacket(undefined)).toBeUndefined();
  });
});

describe("describeClientError", () => {
  it("maps Node's errors to 408, 431 or 400, each with a message a caller can act on", () => {
    const err = (code: string, message: string) => Object.assign(new Error(message), { code });
    expect(describeClientError(err("ERR_HTTP_REQUEST_TIMEOUT", "Request timeout")).status).toBe(408);
    const big = describeClientError(err("HPE_HEADER_OVERFLOW", "Header overflow"));
    expect(big.status).toBe(431);
    expect(big.message).toMatch(/headers too large \(limit \d+ bytes\)/);
    const bad = describeClientError(
      Object.assign(err("HPE_INVALID_VERSION", "Parse Error: x"), { reason: "Invalid HTTP version" }),
    );
    expect(bad).toEqual({ status: 400, message: "malformed HTTP request: Invalid HTTP version" });
  });
});
