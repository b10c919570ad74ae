/** This package's version, from its package.json (the image and a checkout both carry it); 'unknown' when unreadable. */
import { readFileSync } from 'node:fs';

let cached: string | undefined;

export function packageVersion(): string {
  if (cached !== undefined) return cached;
  // dist/src/util/version.js → the package root.
  for (const rel of ['../../../package.json', '../../package.json']) {
    try {
      const v = (JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string });
      if (v.name === 'switchyard' && v.version) return (cached = v.version);
    } catch {
      /* next */
    }
  }
  return (cached = 'unknown');
}
