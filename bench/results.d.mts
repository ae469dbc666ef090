/** Types of bench/results.mjs (the generator of bench/RESULTS.md). */
export interface Headline {
  id: string;
  label?: string;
  value?: string;
  target?: string;
  met?: boolean;
  detail?: string;
  measured?: string;
  ceiling?: string;
  ratio?: string;
  [key: string]: unknown;
}
export interface ResultRow {
  id: string;
  figure: string;
  target: string;
  measured: string;
  ratio: string;
  ceiling: string;
  status: string;
  date: string;
  commit: string;
}
export const BEGIN: string;
export const END: string;
export const COLUMNS: readonly (keyof ResultRow)[];
export function parseHeadline(line: string): Headline | undefined;
export function splitValue(value: string | undefined): { measured: string; ratio: string; ceiling: string };
export function rowOf(h: Headline, meta: { date: string; commit: string }): ResultRow;
export function renderResults(rows: readonly ResultRow[]): string;
export function parseResults(md: string): ResultRow[];
export function mergeResults(previous: readonly ResultRow[], fresh: readonly ResultRow[]): ResultRow[];
export function updateResults(path: string, headlines: readonly Headline[], meta: { date: string; commit: string }): number;
