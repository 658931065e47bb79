/** The insecure guard: which peer security mode a node's flags give, and the combinations refused. */
import { describe, expect, it } from "vitest";
import { checkSecurityMode, SecurityModeError } from "../../src/net/auth/security-mode.js";

describe("checkSecurityMode (the insecure guard)", () => {
  const httpPeers = [{ id: "B", url: "http://127.0.0.1:9002" }];
  const httpsPeers = [{ id: "B", url: "https://127.0.0.1:9002" }];

  it("refuses a multi-node cluster with neither mTLS nor a secret", () => {
    expect(() => checkSecurityMode({ peers: httpPeers, insecure: false })).toThrow(SecurityModeError);
    expect(() => checkSecurityMode({ peers: [], peersDns: "pm.svc", insecure: false })).toThrow(/--insecure/);
  });

  it("allows it with an explicit insecure flag, mTLS or a secret", () => {
    expect(checkSecurityMode({ peers: httpPeers, insecure: true })).toBe("insecure");
    expect(checkSecurityMode({ peers: httpsPeers, tls: {}, insecure: false })).toBe("mtls");
    expect(checkSecurityMode({ peers: httpPeers, secret: new Uint8Array(32), insecure: false })).toBe(
      "shared-secret",
    );
    expect(checkSecurityMode({ peers: [], insecure: false })).toBe("single-node");
  });

  it("refuses mTLS and a secret together: the secret would never be used", () => {
    expect(() => checkSecurityMode({ peers: httpsPeers, tls: {}, secret: "s", insecure: false })).toThrow(
      /--tls-dir and --secret-file were both given/,
    );
    expect(() => checkSecurityMode({ peers: [], tls: {}, secret: "s", insecure: false })).toThrow(
      SecurityModeError,
    );
    // The http:// peers of a shared-secret cluster that added --tls-dir: told of the pair, not of the URLs.
    expect(() => checkSecurityMode({ peers: httpPeers, tls: {}, secret: "s", insecure: false })).toThrow(
      /--tls-dir and --secret-file were both given/,
    );
  });

  it("requires https peer URLs with mTLS and http without a CA", () => {
    expect(() => checkSecurityMode({ peers: httpPeers, tls: {}, insecure: false })).toThrow(/must be https/);
    expect(() => checkSecurityMode({ peers: httpsPeers, secret: "s", insecure: false })).toThrow(
      /no cluster CA/,
    );
  });
});
