/**
 * The session header of the reference JSONL format (dsh-semantics 1.6 and 5.1/5.2): the first
 * logical line of a `session.jsonl`, tagged `{"type":"session", ...}`.
 */
import { DomainError } from './errors.js';
import { SESSION_FORMAT_VERSION, type SessionHeader } from './event.js';
import { isWellFormedText } from './json.js';

/** The `type` tag of the header line. */
export const HEADER_LINE_TYPE = 'session';

/** Reason: the header's `version` is not the one this build reads (dsh-semantics 5.1). */
export const FORMAT_VERSION_UNSUPPORTED = 'FORMAT_VERSION_UNSUPPORTED';
/** Reason: the header line is not a valid session header (dsh-semantics 1.6). */
export const HEADER_INVALID = 'HEADER_INVALID';

/** Header keys in the order the reference writes them (the `type` tag comes first). */
const HEADER_KEYS = [
  'version',
  'id',
  'createdAt',
  'cwd',
  'parentSession',
  'seedLength',
  'origin',
  'delegationDepth',
  'agentPreset',
] as const;
const ALLOWED_KEYS: ReadonlySet<string> = new Set<string>(['type', ...HEADER_KEYS]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function isNonNegativeSafeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0);
}

/** POSIX (`/x`), Windows drive (`C:\x`, `C:/x`) or UNC (`\\host\x`) absolute paths. */
function isAbsolutePath(value: string): boolean {
  return value.startsWith('/') || /^[A-Za-z]:[\\/]/.test(value) || value.startsWith('\\\\');
}

/**
 * Refuses any format version other than {@link SESSION_FORMAT_VERSION}, naming both versions and
 * the direction, as the reference does before it reads anything else of the file.
 *
 * @throws DomainError `FORMAT_VERSION_UNSUPPORTED`
 */
export function checkFormatVersion(version: unknown): void {
  if (version === SESSION_FORMAT_VERSION) return;
  const supported = String(SESSION_FORMAT_VERSION);
  if (typeof version !== 'number' || !Number.isSafeInteger(version)) {
    throw new DomainError(
      FORMAT_VERSION_UNSUPPORTED,
      `session header has no valid format version (got ${describe(version)}); this build reads version ${supported} only`,
      { version: describe(version), supportedVersion: supported, direction: 'unknown' },
    );
  }
  if (version > SESSION_FORMAT_VERSION) {
    throw new DomainError(
      FORMAT_VERSION_UNSUPPORTED,
      `session format version ${version} is newer than this build's version ${supported}: ` +
        'the session was written by a newer harness; upgrade to read it',
      { version: String(version), supportedVersion: supported, direction: 'newer' },
    );
  }
  throw new DomainError(
    FORMAT_VERSION_UNSUPPORTED,
    `session format version ${version} is older than this build's version ${supported}: ` +
      'there is no upgrade path for it',
    { version: String(version), supportedVersion: supported, direction: 'older' },
  );
}

function describe(value: unknown): string {
  if (value === undefined) return 'none';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function invalid(message: string, field: string): DomainError {
  return new DomainError(HEADER_INVALID, `invalid session header: ${message}`, { field });
}

/**
 * Validates a header object (the parsed header line, with or without its `type:"session"` tag)
 * against dsh-semantics 1.6 and returns a fresh, frozen {@link SessionHeader} holding exactly the
 * keys that were present. The version is checked first, before any other field.
 *
 * @param raw - the parsed header.
 * @param expectedId - when given, the header's `id` must equal it (the reference requires the
 *   header id to equal the session id).
 * @throws DomainError `FORMAT_VERSION_UNSUPPORTED` or `HEADER_INVALID`
 */
export function validateSessionHeader(raw: unknown, expectedId?: string): SessionHeader {
  if (!isPlainObject(raw)) throw invalid('the header must be a JSON object', 'header');
  if (Object.hasOwn(raw, 'type') && raw['type'] !== HEADER_LINE_TYPE) {
    throw invalid(`the header line must be tagged type "session", got ${describe(raw['type'])}`, 'type');
  }
  checkFormatVersion(raw['version']);
  for (const key of Object.keys(raw)) {
    if (!ALLOWED_KEYS.has(key)) throw invalid(`unknown header field "${key}"`, key);
    const value = raw[key];
    if (typeof value === 'string' && !isWellFormedText(value)) {
      throw invalid(`${key} holds a lone UTF-16 surrogate (it has no UTF-8 form); write well-formed Unicode`, key);
    }
  }
  const id = raw['id'];
  if (typeof id !== 'string' || id.length === 0) throw invalid('id must be a non-empty string', 'id');
  if (expectedId !== undefined && id !== expectedId) {
    throw invalid(`id "${id}" does not match the session id "${expectedId}"`, 'id');
  }
  if (!isNonNegativeSafeInteger(raw['createdAt'])) {
    throw invalid('createdAt must be a non-negative safe integer (epoch ms)', 'createdAt');
  }
  const out: Record<string, unknown> = { version: SESSION_FORMAT_VERSION, id, createdAt: raw['createdAt'] };
  if (Object.hasOwn(raw, 'cwd')) {
    const cwd = raw['cwd'];
    if (typeof cwd !== 'string' || !isAbsolutePath(cwd)) throw invalid('cwd must be an absolute path', 'cwd');
    out['cwd'] = cwd;
  }
  if (Object.hasOwn(raw, 'parentSession')) {
    if (typeof raw['parentSession'] !== 'string') throw invalid('parentSession must be a string', 'parentSession');
    out['parentSession'] = raw['parentSession'];
  }
  if (Object.hasOwn(raw, 'seedLength')) {
    if (!isNonNegativeSafeInteger(raw['seedLength'])) {
      throw invalid('seedLength must be a non-negative safe integer', 'seedLength');
    }
    out['seedLength'] = raw['seedLength'];
  }
  if (Object.hasOwn(raw, 'origin')) {
    if (raw['origin'] !== 'subagent') throw invalid('origin may only be "subagent"', 'origin');
    out['origin'] = 'subagent';
  }
  if (Object.hasOwn(raw, 'delegationDepth')) {
    if (!isNonNegativeSafeInteger(raw['delegationDepth'])) {
      throw invalid('delegationDepth must be a non-negative safe integer', 'delegationDepth');
    }
    out['delegationDepth'] = raw['delegationDepth'];
  }
  if (Object.hasOwn(raw, 'agentPreset')) {
    if (typeof raw['agentPreset'] !== 'string') throw invalid('agentPreset must be a string', 'agentPreset');
    out['agentPreset'] = raw['agentPreset'];
  }
  return Object.freeze(out) as unknown as SessionHeader;
}

/**
 * Parses and validates the raw header line. The version is refused from the raw line before
 * anything else is looked at (dsh-semantics 5.1).
 *
 * @throws DomainError `FORMAT_VERSION_UNSUPPORTED` or `HEADER_INVALID`
 */
export function parseHeaderLine(line: string, expectedId?: string): SessionHeader {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (err) {
    throw invalid(`line 1 is not JSON (${(err as Error).message})`, 'header');
  }
  if (!isPlainObject(raw) || raw['type'] !== HEADER_LINE_TYPE) {
    throw invalid('line 1 must be the session header, a JSON object tagged {"type":"session"}', 'type');
  }
  return validateSessionHeader(raw, expectedId);
}

/**
 * The header line as the reference writes it: `type:"session"` first, then the present fields in
 * the reference's order. Absent fields are omitted, never null. (The reference's writer always
 * writes `delegationDepth`; headers built by this service should therefore carry it, but a header
 * read from an older file without it is written back without it, so export reproduces the file.)
 */
export function encodeHeaderLine(header: SessionHeader): string {
  const out: Record<string, unknown> = { type: HEADER_LINE_TYPE };
  const source = header as unknown as Record<string, unknown>;
  for (const key of HEADER_KEYS) {
    if (source[key] !== undefined) out[key] = source[key];
  }
  return JSON.stringify(out);
}
