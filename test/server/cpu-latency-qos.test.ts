/** The PM QoS CPU latency hold: clear errors where it cannot be had; held and released where it can. */
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { parseSetting } from "../../src/cli/flags.js";
import {
  CPU_LATENCY_DEVICE,
  CpuLatencyQosError,
  cpuLatencyInForceUs,
  holdCpuLatency,
} from "../../src/server/runtime/cpu-latency-qos.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { loopbackNodeSettings } from "./helpers.js";

const deviceWritable = (() => {
  try {
    accessSync(CPU_LATENCY_DEVICE, constants.W_OK | constants.R_OK);
    return true;
  } catch {
    return false;
  }
})();
if (!deviceWritable) {
  console.warn(`skipping the live PM QoS tests: ${CPU_LATENCY_DEVICE} is absent or not writable here`);
}

describe("CPU latency hold: refusals", () => {
  it("names the path and the reason when the device is missing or is not a device", () => {
    expect(() => holdCpuLatency(0, "/nonexistent/cpu_dma_latency")).toThrow(CpuLatencyQosError);
    expect(() => holdCpuLatency(0, "/nonexistent/cpu_dma_latency")).toThrow(/does not exist/);
    const dir = mkdtempSync(join(tmpdir(), "pm-qos-"));
    try {
      const file = join(dir, "plain");
      writeFileSync(file, "");
      expect(() => holdCpuLatency(0, file)).toThrow(/not a character device/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses limits the kernel's s32 cannot carry, and the setting's bounds name the flag", () => {
    expect(() => holdCpuLatency(-1)).toThrow(/integer from 0/);
    expect(() => holdCpuLatency(1.5)).toThrow(/integer from 0/);
    expect(() => holdCpuLatency(2 ** 31)).toThrow(/integer from 0/);
    expect(parseSetting("cpuLatencyUs", "0")).toBe(0);
    expect(() => parseSetting("cpuLatencyUs", "-1")).toThrow(/^--cpu-latency-us: /);
    expect(() => parseSetting("cpuLatencyUs", "fast")).toThrow(/^--cpu-latency-us: /);
  });
});

describe.skipIf(!deviceWritable)("CPU latency hold on this kernel", () => {
  it("is in force while held (the lowest request wins) and gone once released", () => {
    const before = cpuLatencyInForceUs();
    const loose = holdCpuLatency(before === 0 ? 0 : 50);
    const strict = holdCpuLatency(0);
    expect(cpuLatencyInForceUs()).toBe(0);
    strict.release();
    strict.release(); // idempotent
    expect(cpuLatencyInForceUs()).toBe(loose.requestedUs);
    loose.release();
    expect(cpuLatencyInForceUs()).toBe(before);
  });

  it("a node started with cpuLatencyUs holds it until it stops", async () => {
    const before = cpuLatencyInForceUs();
    if (before === 0) return; // another holder already pins it: nothing this node changes is visible
    const s = await loopbackNodeSettings({
      engine: "sim",
      // Alone and without credentials: a scuttlebutt node (anyone could join it) must say so.
      insecure: true,
      cpuLatencyUs: "0",
    });
    const node = await startNode(s, { logger: pino({ level: "silent" }) });
    try {
      expect(cpuLatencyInForceUs()).toBe(0);
      expect((node.runtime.clusterView() as { cpuLatencyUs: number | null }).cpuLatencyUs).toBe(0);
    } finally {
      await node.stop();
    }
    expect(cpuLatencyInForceUs()).toBe(before);
  });
});
