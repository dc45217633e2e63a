// Business dates (validity bounds, effective dates) travel as YYYY-MM-DD strings. Checked before they
// reach SQL so a bad date is a domain error, not an aborted transaction.

/** True for a real calendar day written YYYY-MM-DD (e.g. not 2024-02-30). */
export function isBusinessDate(value: unknown): value is string {
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const parsed = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === value;
}
