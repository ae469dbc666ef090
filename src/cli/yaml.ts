/**
 * YAML for `-o yaml`: JSON values in block style. Strings that could read as another YAML type
 * (numbers, booleans, null, dates) or hold special characters are double-quoted with JSON's
 * escapes, which YAML's double-quoted scalars share.
 */

const PLAIN = /^[A-Za-z_/.][A-Za-z0-9_ ./@()+-]*$/;
const RESERVED = /^(?:true|false|null|yes|no|on|off|y|n|~|\.nan|\.inf|-\.inf)$/i;

function scalar(s: string): string {
  return PLAIN.test(s) && !RESERVED.test(s) && !s.endsWith(' ') && !s.includes(' #') ? s : JSON.stringify(s);
}

function isCollection(v: unknown): v is object {
  return v !== null && typeof v === 'object' && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function inline(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return scalar(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return Array.isArray(v) ? '[]' : '{}';
}

function lines(v: unknown, indent: string): string[] {
  if (Array.isArray(v)) {
    return v.flatMap((item) => {
      if (!isCollection(item)) return [`${indent}- ${inline(item)}`];
      const [first = '', ...rest] = lines(item, `${indent}  `);
      return [`${indent}- ${first.slice(indent.length + 2)}`, ...rest];
    });
  }
  return Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).flatMap(([k, x]) =>
    isCollection(x) ? [`${indent}${scalar(k)}:`, ...lines(x, `${indent}  `)] : [`${indent}${scalar(k)}: ${inline(x)}`]);
}

/** `value` (a JSON value) as one YAML document, ending with a newline. */
export function toYaml(value: unknown): string {
  return (isCollection(value) ? lines(value, '') : [inline(value)]).join('\n') + '\n';
}
