/**
 * What an error may echo is bounded (issue #17, finding 1): messages at 1 KiB and metadata
 * values at 256 bytes of UTF-8, cut at a character boundary, whatever a rule put in them.
 */
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { clip, domainErrorToStatus } from '../../src/server/status-map.js';
import { decodeError } from '../../src/client/error-details.js';

const wellFormed = (s: string): boolean => s === Buffer.from(s, 'utf8').toString('utf8') && !/[\uD800-\uDFFF]/.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

describe('clip', () => {
  it('keeps short strings, cuts long ones at a character boundary with a marker', () => {
    expect(clip('short', 16)).toBe('short');
    for (const unit of ['x', 'é', '✓', '𝄞']) {
      const s = unit.repeat(5000);
      const c = clip(s, 1024);
      expect(Buffer.byteLength(c), unit).toBeLessThanOrEqual(1024);
      expect(Buffer.byteLength(c), unit).toBeGreaterThan(1010);
      expect(c.endsWith('…'), unit).toBe(true);
      expect(wellFormed(c), unit).toBe(true);
      expect(s.startsWith(c.slice(0, -1)), unit).toBe(true);
    }
  });

  it('bounds every part of a status built from a rule error that quoted a huge value', () => {
    const huge = '𝄞'.repeat(30_000);
    const se = domainErrorToStatus(new DomainError('HEADER_INVALID', `cwd ${huge} must be absolute`, { field: 'cwd', value: huge }));
    expect(Buffer.byteLength(se.details)).toBeLessThanOrEqual(1024);
    const d = decodeError(se);
    expect(Buffer.byteLength(d.message)).toBeLessThanOrEqual(1024);
    expect(Buffer.byteLength(d.metadata.value ?? '')).toBeLessThanOrEqual(256);
    expect(Buffer.byteLength(d.badRequest?.fieldViolations[0]?.description ?? '')).toBeLessThanOrEqual(1024);
    expect((se.metadata.get('grpc-status-details-bin')[0] as Buffer).length).toBeLessThan(3000);
  });
});
