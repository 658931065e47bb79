/** CPU time of this process (user + system, all its threads), ms, since a `process.cpuUsage()` reading. */
export function cpuMsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}
