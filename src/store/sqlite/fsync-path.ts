/** Making a file, or a directory's entries, durable (the backups of backup.ts and migrate.ts). */
import { closeSync, fsyncSync, openSync } from 'node:fs';

/** fsyncs `path`, a file or a directory (for a directory: the names created in it). */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
