/** The peer address a node advertises (`--advertise`, advertise.ts). */
import type { NetworkInterfaceInfo } from "node:os";
import { describe, expect, it } from "vitest";
import { advertisedPeerUrl } from "../../src/server/runtime/advertise.js";

const nic = (address: string, internal: boolean, family: "IPv4" | "IPv6" = "IPv4") =>
  ({ address, internal, family, netmask: "", mac: "", cidr: null }) as NetworkInterfaceInfo;
const machine = {
  lo: [nic("127.0.0.1", true)],
  eth0: [nic("fe80::1", false, "IPv6"), nic("10.1.2.3", false)],
};

describe("the advertised peer address", () => {
  it("is --advertise when given, in the peer port's scheme", () => {
    expect(advertisedPeerUrl("https://0.0.0.0:9080", "node-a.example:19080", machine)).toEqual({
      url: "https://node-a.example:19080",
      source: "advertise",
    });
  });

  it("is the bound address when it names a host", () => {
    expect(advertisedPeerUrl("http://127.0.0.1:9080", undefined, machine)).toEqual({
      url: "http://127.0.0.1:9080",
      source: "listen",
    });
  });

  it("is the first non-loopback IPv4 address, with the bound port, for a wildcard listen", () => {
    for (const bound of ["http://0.0.0.0:9080", "http://[::]:9080"])
      expect(advertisedPeerUrl(bound, undefined, machine)).toEqual({
        url: "http://10.1.2.3:9080",
        source: "interface",
      });
  });

  it("stays the wildcard (and says so) when the machine has no such address", () => {
    expect(advertisedPeerUrl("http://0.0.0.0:9080", undefined, { lo: machine.lo })).toEqual({
      url: "http://0.0.0.0:9080",
      source: "wildcard",
    });
  });
});
