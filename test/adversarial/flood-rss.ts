/**
 * The flood tests' memory probe: the peak resident set of this process (the
 * gateway: the controller runs in the test's own worker) over a stretch,
 * by sampling process.memoryUsage().rss, and by the kernel's own high-water
 * mark (VmHWM, reset through /proc/self/clear_refs where the kernel allows
 * it) so that a peak between two samples is not missed.
 */
import { readFileSync, writeFileSync } from "node:fs";

export interface RssReport {
  baselineMb: number;
  peakMb: number;
  growthMb: number;
  samples: number;
  /** the kernel's peak was reset at the start and read at the end */
  kernelPeak: boolean;
}

const MB = 1024 * 1024;

function vmHwmBytes(): number | null {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export class RssPeak {
  private readonly baseline = process.memoryUsage().rss;
  private peak = this.baseline;
  private samples = 0;
  private readonly kernel: boolean;
  private readonly timer: NodeJS.Timeout;

  constructor(everyMs = 10) {
    let reset = false;
    try {
      writeFileSync("/proc/self/clear_refs", "5");
      reset = true;
    } catch {
      // an old kernel or no permission: the samples alone
    }
    this.kernel = reset && vmHwmBytes() !== null;
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  sample(): void {
    this.samples++;
    const rss = process.memoryUsage().rss;
    if (rss > this.peak) this.peak = rss;
  }

  stop(): RssReport {
    clearInterval(this.timer);
    this.sample();
    const hwm = this.kernel ? (vmHwmBytes() ?? 0) : 0;
    const peak = Math.max(this.peak, hwm);
    return {
      baselineMb: Math.round(this.baseline / MB),
      peakMb: Math.round(peak / MB),
      growthMb: Math.round((peak - this.baseline) / MB),
      samples: this.samples,
      kernelPeak: this.kernel,
    };
  }
}
