/**
 * TURN_SHAPE: the turn/start and turn/end shapes the reference's load path refuses as corruption
 * while it migrates the older ("pre-react-loop") envelopes. Palimpsest stores events verbatim, so
 * it does not migrate them, but it refuses on import exactly what the reference would refuse on
 * load, so that a file Palimpsest imports loads in the reference and the reverse.
 *
 * - **turn/start with a `trigger`** (the older shape): `turn` a safe integer >= 1, no keys besides
 *   `turn` and `trigger`, and `trigger` an object with a non-empty string `kind`. Without a
 *   trigger nothing is checked.
 * - **turn/end** (when its data is an object): `turn` a safe integer >= 1, no keys besides `turn`
 *   and `reason`, and `reason` an object with a string `kind`. Then by kind: `completed`,
 *   `blocked`, `max-tokens`, `interrupted` carry nothing else; `aborted` is either current (it
 *   has a nested `reason`) or the older bare `{kind}`; `disposed` is the older bare `{kind}`;
 *   `error` is either current (it has `error`) or one of the older shapes `{kind, step, failure}`
 *   (a failure with string `message` and `code`, and optionally a numeric `status` and
 *   `providerRetryAfterMs` and a string `requestId`) or `{kind, step, message, code?}` (strings),
 *   with `step` a non-negative safe integer. Other kinds are not checked.
 *
 * Checked on import of a file only: live append, like the reference's, does not check them.
 */
import { DomainError } from './errors.js';
import type { Json } from './event.js';
import { isJsonObject } from './json.js';
import { Reason } from './reasons.js';

type JsonRecord = { readonly [key: string]: Json };

/** Whether `record` has every `required` key and no key outside `required` and `optional`. */
function hasOnlyKeys(record: JsonRecord, required: readonly string[], optional: readonly string[] = []): boolean {
  const allowed = new Set([...required, ...optional]);
  return Object.keys(record).every((k) => allowed.has(k)) && required.every((k) => Object.hasOwn(record, k));
}

function isTurnNumber(v: Json | undefined): boolean {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;
}

function malformed(type: string, what: string): DomainError {
  return new DomainError(Reason.TURN_SHAPE, `${type} has an older shape the reference refuses to load: ${what}`, { type });
}

/** Why an older-shape `error` turn-end reason is malformed, or undefined when it is well formed. */
function legacyErrorProblem(reason: JsonRecord): string | undefined {
  const step = reason['step'];
  if (!(typeof step === 'number' && Number.isSafeInteger(step) && step >= 0)) return 'reason {kind:"error"} without error needs a non-negative integer step';
  const failure = reason['failure'];
  if (isJsonObject(failure) && hasOnlyKeys(reason, ['kind', 'step', 'failure'])
    && hasOnlyKeys(failure, ['message', 'code'], ['status', 'providerRetryAfterMs', 'requestId'])
    && typeof failure['message'] === 'string' && typeof failure['code'] === 'string'
    && (failure['status'] === undefined || typeof failure['status'] === 'number')
    && (failure['providerRetryAfterMs'] === undefined || typeof failure['providerRetryAfterMs'] === 'number')
    && (failure['requestId'] === undefined || typeof failure['requestId'] === 'string')) return undefined;
  const keys = reason['code'] === undefined ? ['kind', 'step', 'message'] : ['kind', 'step', 'message', 'code'];
  if (!hasOnlyKeys(reason, keys) || typeof reason['message'] !== 'string' || (reason['code'] !== undefined && typeof reason['code'] !== 'string')) {
    return 'reason {kind:"error"} without error must be {kind, step, failure:{message, code, status?, providerRetryAfterMs?, requestId?}} or {kind, step, message, code?} with string message and code';
  }
  return undefined;
}

/**
 * Refuses the turn/start and turn/end shapes the reference's load path refuses (see the module
 * comment); every other type passes.
 *
 * @throws DomainError `TURN_SHAPE`
 */
export function checkLegacyTurnShape(type: string, data: Json): void {
  if (!isJsonObject(data)) return;
  if (type === 'turn/start') {
    if (!Object.hasOwn(data, 'trigger')) return;
    const trigger = data['trigger'];
    if (!isTurnNumber(data['turn'])) throw malformed(type, 'with a trigger, turn must be an integer >= 1');
    if (!hasOnlyKeys(data, ['turn', 'trigger'])) throw malformed(type, 'with a trigger, data may hold only turn and trigger');
    if (!isJsonObject(trigger) || typeof trigger['kind'] !== 'string' || trigger['kind'].length === 0) throw malformed(type, 'trigger must be an object with a non-empty kind');
    return;
  }
  if (type !== 'turn/end') return;
  const reason = data['reason'];
  if (!isTurnNumber(data['turn'])) throw malformed(type, 'turn must be an integer >= 1');
  if (!hasOnlyKeys(data, ['turn', 'reason'])) throw malformed(type, 'data must hold exactly turn and reason');
  if (!isJsonObject(reason) || typeof reason['kind'] !== 'string') throw malformed(type, 'reason must be an object with a string kind');
  switch (reason['kind']) {
    case 'completed':
    case 'blocked':
    case 'max-tokens':
    case 'interrupted':
    case 'disposed':
      if (!hasOnlyKeys(reason, ['kind'])) throw malformed(type, `reason {kind:${JSON.stringify(reason['kind'])}} may hold nothing else`);
      return;
    case 'aborted':
      if (!Object.hasOwn(reason, 'reason') && !hasOnlyKeys(reason, ['kind'])) throw malformed(type, 'reason {kind:"aborted"} needs a nested reason, or nothing else (the older shape)');
      return;
    case 'error': {
      if (Object.hasOwn(reason, 'error')) return;
      const problem = legacyErrorProblem(reason);
      if (problem !== undefined) throw malformed(type, problem);
      return;
    }
    default:
      return;
  }
}
