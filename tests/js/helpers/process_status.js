// A process's OS threads and resident memory (MB), from /proc/<pid>/status (Linux): what the
// tests of loading and disposing watch.
import { readFileSync } from 'node:fs';

export function processStatus(pid = 'self') {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (key) => Number(text.match(new RegExp(`^${key}:\\s+(\\d+)`, 'm'))[1]);
  return { threads: field('Threads'), rssMB: field('VmRSS') / 1024 };
}
