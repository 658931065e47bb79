/**
 * Linux's PM QoS CPU latency request (/dev/cpu_dma_latency), held while a node runs.
 *
 * Why: a node spends most of its life waiting for a message. When its CPU is idle the kernel halts
 * it, and waking a halted CPU for the next message is cheap on bare metal but, on a VM whose host
 * does not poll for it (halt-polling off), a trip through the hypervisor with a long tail, paid at
 * every process hand-off (BENCHMARKS.md, "Router overhead" has the figures). Holding the latency limit
 * at 0 makes idle CPUs poll instead of halting, so a hand-off stays cheap — at the price of idle CPUs
 * spinning. This is the kernel's documented interface for that trade (what
 * tuned's latency-performance profile does); the request lasts while the file stays open, so it ends
 * with the process however it ends.
 */
import { closeSync, constants, fstatSync, openSync, readSync, writeSync } from "node:fs";

export const CPU_LATENCY_DEVICE = "/dev/cpu_dma_latency";
/** The largest limit the kernel's s32 request carries, µs. */
export const MAX_CPU_LATENCY_US = 0x7fffffff;

export class CpuLatencyQosError extends Error {
  override name = "CpuLatencyQosError";
}

export interface CpuLatencyHold {
  /** The limit this process asked for, µs. */
  readonly requestedUs: number;
  /** Ends the request (idempotent); the kernel then applies the other holders' limits, if any. */
  release(): void;
}

function openDevice(device: string, flags: number): number {
  let fd: number;
  try {
    fd = openSync(device, flags);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "it does not exist (Linux with PM QoS only)"
        : code === "EACCES" || code === "EPERM"
          ? "permission denied (needs root, or write access granted to this user)"
          : (err as Error).message;
    throw new CpuLatencyQosError(`cannot open ${device}: ${why}`);
  }
  if (!fstatSync(fd).isCharacterDevice()) {
    closeSync(fd);
    throw new CpuLatencyQosError(`${device} is not a character device, so not a PM QoS interface`);
  }
  return fd;
}

/** Asks the kernel to keep CPU wake-up latency at or below `us` µs until `release()` or exit. */
export function holdCpuLatency(us: number, device = CPU_LATENCY_DEVICE): CpuLatencyHold {
  if (!Number.isInteger(us) || us < 0 || us > MAX_CPU_LATENCY_US) {
    throw new CpuLatencyQosError(
      `CPU latency limit must be an integer from 0 to ${MAX_CPU_LATENCY_US} µs, got ${us}`,
    );
  }
  const fd = openDevice(device, constants.O_WRONLY);
  try {
    // The kernel reads an s32 in the machine's byte order: an Int32Array is exactly that.
    writeSync(fd, new Int32Array([us]));
  } catch (err) {
    closeSync(fd);
    throw new CpuLatencyQosError(`cannot write ${device}: ${(err as Error).message}`);
  }
  let open = true;
  return {
    requestedUs: us,
    release() {
      if (!open) return;
      open = false;
      closeSync(fd);
    },
  };
}

/** The limit the kernel applies now (the lowest of all holders' requests, or its default), µs. */
export function cpuLatencyInForceUs(device = CPU_LATENCY_DEVICE): number {
  const fd = openDevice(device, constants.O_RDONLY);
  try {
    const v = new Int32Array(1);
    if (readSync(fd, v) !== 4) throw new CpuLatencyQosError(`short read from ${device}`);
    return v[0] as number;
  } finally {
    closeSync(fd);
  }
}
