/**
 * Which `--db` values select the PostgreSQL store, and how they are shown in logs. Kept apart
 * from the store so the composition root can decide without loading the driver.
 */

/** True for a `postgresql://` or `postgres://` URL (anything else is a SQLite path or `:memory:`). */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//i.test(db);
}

/** The URL with its password replaced by `***` (for logs and error messages). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    const params = u.searchParams;
    if (params.has('password')) params.set('password', '***');
    return u.toString();
  } catch {
    return 'postgresql://(unparsable URL)';
  }
}
