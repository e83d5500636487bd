import { readFileSync } from 'node:fs';

/** Linux reports /proc/stat in USER_HZ, which is 100 on every mainstream kernel. */
const USER_HZ = 100;

/**
 * CPU time the whole machine has spent running processes (user, nice, system) or lost to
 * another guest on the host (steal), in milliseconds; undefined where /proc/stat does not
 * exist. Interrupt time is left out: loopback traffic's own softirq work is nobody's process.
 */
export function machineBusyMs(): number | undefined {
  try {
    const [user, nice, system, , , , , steal = 0] = readFileSync('/proc/stat', 'utf8')
      .split('\n', 1)[0]
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return ((user + nice + system + steal) * 1000) / USER_HZ;
  } catch {
    return undefined;
  }
}

/** This process's own CPU time (the load generator), in milliseconds. */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
